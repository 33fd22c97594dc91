// A real session agent (`node bin/stash.js __agent`, compiled dist/) in a
// private temporary folder, for the agent and suspend scripts. Its environment
// and start-up wait are the tests' own (test/helpers/agent-env.js), so a
// benchmark's agent is isolated exactly as a test's is.
import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { privateAgentEnv, waitListening } from '../test/helpers/agent-env.js';
import { bin, dist, root } from './lib.js';

/**
 * Environment of a private agent: its own HOME, XDG folders, vault, socket folder and log; `extra`
 * wins. `stash(args, input)` runs the compiled CLI there and returns its stdout (throws with its
 * stderr on a non-zero exit).
 */
export function agentHome(extra = {}) {
  const home = mkdtempSync(join(tmpdir(), 'stash-bench-'));
  const env = privateAgentEnv(home, {
    XDG_DATA_HOME: join(home, 'data'),
    STASH_VAULT_DIR: join(home, 'vault'),
    STASH_PASSWORD_FILE: undefined,
    ...extra,
  });
  return {
    home,
    env,
    dir: env.STASH_SESSION_AGENT_DIR,
    stash(args, input) {
      const r = spawnSync(process.execPath, [bin('stash.js'), ...args], { cwd: root, env, input, encoding: 'utf8' });
      if (r.status !== 0) throw new Error(`stash ${args.join(' ')} failed (${r.status}): ${r.stderr}`);
      return r.stdout;
    },
    remove: () => rmSync(home, { recursive: true, force: true, maxRetries: 10, retryDelay: 50 }),
  };
}

/** Starts `stash __agent` in the foreground and connects a client. */
export async function startAgent(h, cpu) {
  const argv =
    cpu === undefined
      ? [process.execPath, bin('stash.js'), '__agent']
      : ['taskset', '-c', String(cpu), process.execPath, bin('stash.js'), '__agent'];
  const proc = spawn(argv[0], argv.slice(1), { cwd: root, env: h.env, stdio: ['ignore', 'ignore', 'inherit'] });
  await waitListening(proc, join(h.dir, 'agent.sock'));
  const { AgentClient } = await import(dist('agent/client.js'));
  const { agentEndpoint } = await import(dist('agent/paths.js'));
  const client = await AgentClient.connect(agentEndpoint(h.env));
  return {
    proc,
    client,
    async stop() {
      try {
        await client.stop();
      } catch {
        /* already gone */
      }
      client.close();
      if (proc.exitCode === null) {
        const timer = setTimeout(() => proc.kill('SIGKILL'), 3000);
        await once(proc, 'exit');
        clearTimeout(timer);
      }
    },
  };
}
