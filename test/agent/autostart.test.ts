import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { AgentClient } from '../../src/agent/client.js';
import { agentEndpoint } from '../../src/agent/paths.js';
import { agentEnv, agentPids, exited, sleep, waitFor } from '../helpers/agent.js';
import { isRoot, needFacility, tsNode } from '../helpers/facility.js';

const fixture = join(process.cwd(), 'test', 'fixtures', 'agent-client.ts');

function runClient(env: NodeJS.ProcessEnv): Promise<{ code: number | string; out: string; err: string }> {
  const p = spawn(...tsNode(fixture), { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  p.stdout!.on('data', (d) => {
    out += d;
  });
  p.stderr!.on('data', (d) => {
    err += d;
  });
  // A bound, not a speed: alone a client is done in about 1 s; eight client starts at once in a whole CI run (then through tsx)
  // (load 26 on 2 CPUs) went past 20 s.
  return exited(p, 90_000).then((code) => ({ code, out: out.trim(), err }));
}

test('eight concurrent first commands end with exactly one agent', async () => {
  const t = agentEnv();
  try {
    const results = await Promise.all(Array.from({ length: 8 }, () => runClient(t.env)));
    for (const r of results) assert.is(r.code, 0, r.err);
    const pids = new Set(results.map((r) => r.out));
    assert.is(pids.size, 1, `clients talked to agents ${[...pids].join(', ')}`);
    const agentPid = Number([...pids][0]);
    // The losing agents exit at once; only the winner stays.
    if (
      needFacility(
        isRoot,
        "reading other processes' /proc environ",
        'agents are non-dumpable: only root can read their environment',
      )
    ) {
      await waitFor(() => agentPids(t.dir).length === 1, 5000, 'losing agents to exit');
      assert.equal(agentPids(t.dir), [agentPid]);
    }
    const c = await AgentClient.connect(agentEndpoint({ STASH_SESSION_AGENT_DIR: t.dir }));
    assert.is((await c.list()).length, 8, "every client's key landed in the one agent");
    await c.stop();
    c.close();
    await sleep(200);
  } finally {
    t.cleanup();
  }
});

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

test('a first command after the agent died starts a new one', async () => {
  const t = agentEnv();
  try {
    const first = await runClient(t.env);
    assert.is(first.code, 0, first.err);
    process.kill(Number(first.out), 'SIGKILL');
    await sleep(100);
    const second = await runClient(t.env);
    assert.is(second.code, 0, second.err);
    assert.is.not(second.out, first.out);
    process.kill(Number(second.out), 'SIGTERM');
    await waitFor(() => !alive(Number(second.out)), 5000, 'the second agent to exit');
  } finally {
    t.cleanup();
  }
});

test.run();
