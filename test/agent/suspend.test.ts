/**
 * Suspend safety of the live agent process (`node bin/stash.js __agent`) on a
 * real dbus-daemon with python3-dbusmock's logind (test/fixtures/logind-bus.ts):
 * the locks as logind lists them, activities, PrepareForSleep from logind and
 * from a stranger, terminate_on_suspend on and off, 100 cycles, a shared
 * container's key cached by the CLI and wiped, and no bus.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { AgentClient, type AgentError } from '../../src/agent/client.js';
import { agentEndpoint } from '../../src/agent/paths.js';
import { logindBusFacility, startLogindBus, type Inhibitor, type LogindBus } from '../fixtures/logind-bus.js';
import { agentEnv, exited, readLog, running, startAgent, waitFor, type TestAgentEnv } from '../helpers/agent.js';
import { needFacility } from '../helpers/facility.js';
import { join } from 'node:path';
import { addContact, identityPublic, unlockVault, wipe } from '../../src/vault/index.js';
import { cliEnv, type CliEnv } from '../cli/harness.js';

const facility = logindBusFacility();
const usable = process.platform === 'linux' && facility.available;
let bus: LogindBus | null = null;

// The stand-in reports a fixed pid for every inhibitor, so locks are told
// apart by who and mode; each test runs one agent and waits for the previous
// one's locks to go first.
const ours = (list: Inhibitor[], mode: string) => list.filter((i) => i.who === 'stash' && i.mode === mode);

interface Running {
  t: TestAgentEnv;
  proc: ChildProcess;
  client: AgentClient;
  close(): Promise<void>;
}

/** An agent on the private bus, with the given terminate_on_suspend. */
async function agentOnBus(terminate: boolean): Promise<Running> {
  await waitFor(
    async () => (await bus!.listInhibitors()).every((i) => i.who !== 'stash'),
    5000,
    "the previous agent's locks to go",
  );
  const t = agentEnv({
    DBUS_SYSTEM_BUS_ADDRESS: bus!.address,
    STASH_AGENT_TERMINATE_ON_SUSPEND: terminate ? '1' : '0',
  });
  const proc = await startAgent(t);
  const client = await AgentClient.connect(agentEndpoint({ STASH_SESSION_AGENT_DIR: t.dir }));
  await waitFor(async () => ours(await bus!.listInhibitors(), 'delay').length === 1, 5000, "the agent's delay lock");
  return {
    t,
    proc,
    client,
    async close() {
      client.close();
      proc.kill('SIGTERM');
      await exited(proc);
      t.cleanup();
    },
  };
}

/** A child of this test process (so the agent accepts it as our descendant). */
function child(): ChildProcess {
  return spawn('sleep', ['60'], { stdio: 'ignore' });
}

async function power(c: AgentClient): Promise<Record<string, unknown>> {
  return (await c.status()).power as Record<string, unknown>;
}

async function codeOf(p: Promise<unknown>): Promise<string> {
  try {
    await p;
  } catch (err) {
    return (err as AgentError).code;
  }
  return 'no error';
}

test.before(async () => {
  if (!needFacility(usable, 'logind stand-in', process.platform === 'linux' ? facility.reason : 'Linux only')) return;
  bus = await startLogindBus();
});

test.after(async () => {
  await bus?.stop();
});

test('the delay lock is held once the agent runs; status reports logind', async () => {
  if (!bus) return;
  const a = await agentOnBus(true);
  try {
    const delay = ours(await bus.listInhibitors(), 'delay');
    assert.equal(
      delay.map((i) => [i.what, i.mode]),
      [['sleep', 'delay']],
    );
    const p = await power(a.client);
    assert.is(p.backend, 'logind');
    assert.is(p.available, true);
    assert.equal(p.delayLock, { held: true, reason: null });
    assert.match(readLog(a.t), /suspend protection active \(logind/);
  } finally {
    await a.close();
  }
});

test('an activity holds a block inhibitor; unregistering or the process dying removes it', async () => {
  if (!bus) return;
  const a = await agentOnBus(true);
  const kid = child();
  const kid2 = child();
  try {
    const token = await a.client.registerActivity(kid.pid!, 'env');
    await waitFor(async () => ours(await bus!.listInhibitors(), 'block').length === 1, 3000, 'the block lock');
    assert.equal(
      ours(await bus.listInhibitors(), 'block').map((i) => i.why),
      ['env'],
    );
    await a.client.unregisterActivity(kid.pid!, token);
    await waitFor(
      async () => ours(await bus!.listInhibitors(), 'block').length === 0,
      3000,
      'the block lock to go after unregister',
    );

    await a.client.registerActivity(kid2.pid!, 'open');
    await waitFor(
      async () => ours(await bus!.listInhibitors(), 'block').length === 1,
      3000,
      'the block lock for the second child',
    );
    kid2.kill('SIGKILL');
    await exited(kid2);
    // No unregister: the agent prunes the dead process on its own (housekeeping tick).
    await waitFor(
      async () => ours(await bus!.listInhibitors(), 'block').length === 0,
      5000,
      'the block lock to go after the process died',
    );
    assert.equal((await a.client.status()).activities, []);
    assert.is(ours(await bus.listInhibitors(), 'delay').length, 1, 'the delay lock is untouched');
  } finally {
    kid.kill('SIGKILL');
    kid2.kill('SIGKILL');
    await a.close();
  }
});

test('unrelated pids are refused: they are neither the caller nor its descendants', async () => {
  if (!bus) return;
  const a = await agentOnBus(true);
  try {
    assert.is(await codeOf(a.client.registerActivity(1, 'env')), 'AGENT_ACTIVITY_REFUSED');
    assert.is(await codeOf(a.client.registerActivity(process.ppid, 'env')), 'AGENT_ACTIVITY_REFUSED');
    assert.is(await codeOf(a.client.registerActivity(2 ** 22 + 12345, 'env')), 'AGENT_NO_PROCESS');
    assert.is(ours(await bus.listInhibitors(), 'block').length, 0);
  } finally {
    await a.close();
  }
});

test('PrepareForSleep(true), terminate on: keys wiped before the delay lock goes, children terminated; (false): lock back', async () => {
  if (!bus) return;
  const a = await agentOnBus(true);
  const kid = child();
  try {
    const ids = Array.from({ length: 5 }, () => randomBytes(16));
    for (const id of ids) await a.client.put(id, randomBytes(32), { ttl: 600 });
    await a.client.registerActivity(kid.pid!, 'env');
    await waitFor(async () => ours(await bus!.listInhibitors(), 'block').length === 1, 3000, 'the block lock');

    await bus.emitPrepareForSleep(true);
    const how = await exited(kid, 5000);
    assert.is(how, 'SIGTERM', 'the activity process got SIGTERM');
    await waitFor(
      async () => ours(await bus!.listInhibitors(), 'delay').length === 0,
      5000,
      'the delay lock to be released',
    );
    for (const id of ids) assert.is(await a.client.get(id), null, 'every get misses after the suspend signal');
    const p = await power(a.client);
    assert.is(p.phase, 'sleeping');
    const last = p.lastSuspend as { wipeLatencyMs: number; releaseLatencyMs: number };
    assert.ok(
      last.wipeLatencyMs <= last.releaseLatencyMs,
      `wiped (${last.wipeLatencyMs} ms) before the release (${last.releaseLatencyMs} ms)`,
    );
    assert.ok(last.releaseLatencyMs < 5000, "inside logind's 5 s budget");
    assert.is(ours(await bus.listInhibitors(), 'block').length, 0, 'no block lock once the activity is gone');
    // Until resume, no new key may be cached: it would sleep in memory.
    assert.is(await codeOf(a.client.put(randomBytes(16), randomBytes(32), {})), 'AGENT_SUSPENDING');
    // Nor may a secret activity start: it could be neither kept awake nor terminated.
    const late = child();
    assert.is(await codeOf(a.client.registerActivity(late.pid!, 'env')), 'AGENT_SUSPENDING');
    assert.match(readLog(a.t), /suspend: wiped 5 key\(s\); activities: 1 terminated, 0 killed/);

    await bus.emitPrepareForSleep(false);
    await waitFor(
      async () => ours(await bus!.listInhibitors(), 'delay').length === 1,
      5000,
      'the delay lock to come back',
    );
    assert.is((await power(a.client)).phase, 'idle');
    const id = randomBytes(16);
    await a.client.put(id, randomBytes(32), {});
    assert.ok(await a.client.get(id), 'keys are cached again after resume');
    const token = await a.client.registerActivity(late.pid!, 'env');
    await a.client.unregisterActivity(late.pid!, token);
    late.kill('SIGKILL');
  } finally {
    kid.kill('SIGKILL');
    await a.close();
  }
});

test('PrepareForSleep(true), terminate off: children keep running, the block lock goes, and comes back after resume', async () => {
  if (!bus) return;
  const a = await agentOnBus(false);
  const kid = child();
  try {
    const id = randomBytes(16);
    await a.client.put(id, randomBytes(32), {});
    await a.client.registerActivity(kid.pid!, 'open');
    await waitFor(async () => ours(await bus!.listInhibitors(), 'block').length === 1, 3000, 'the block lock');

    await bus.emitPrepareForSleep(true);
    await waitFor(
      async () => ours(await bus!.listInhibitors(), 'delay').length === 0,
      5000,
      'the delay lock to be released',
    );
    assert.is(await a.client.get(id), null);
    assert.is(
      ours(await bus.listInhibitors(), 'block').length,
      0,
      'the block lock is dropped: the activity is no longer protected',
    );
    // The delay lock goes only once the agent's suspend handling has settled, signals sent and waited for.
    // Its line says what that handling ended (nothing: no "clipboard clears" part) and what it left running.
    assert.match(readLog(a.t), /suspend: wiped 1 key\(s\); 1 activit\(ies\) left running without a sleep inhibitor/);
    assert.ok(running(kid.pid!), 'the activity process is left running');
    assert.is(kid.signalCode, null);

    await bus.emitPrepareForSleep(false);
    await waitFor(
      async () => ours(await bus!.listInhibitors(), 'delay').length === 1,
      5000,
      'the delay lock to come back',
    );
    await waitFor(
      async () => ours(await bus!.listInhibitors(), 'block').length === 1,
      5000,
      'the block lock for the still-running activity',
    );
  } finally {
    kid.kill('SIGKILL');
    await a.close();
  }
});

test('a form activity (a pending clipboard clear) takes no block lock and is terminated on suspend even with terminate off', async () => {
  if (!bus) return;
  const a = await agentOnBus(false);
  const clip = child();
  const other = child();
  try {
    await a.client.registerActivity(clip.pid!, 'form');
    // The agent decides on the block lock while it handles the registration: once it answered, its status
    // shows the decision (a lock wanted but not taken yet would show as a reason).
    const after = await a.client.status();
    assert.equal(after.activityKinds, ['form']);
    assert.equal((after.power as Record<string, unknown>).blockLock, { held: false, kinds: [], reason: null });
    assert.is(ours(await bus.listInhibitors(), 'block').length, 0, 'a form activity alone holds no block lock');
    await a.client.registerActivity(other.pid!, 'env');
    await waitFor(
      async () => ours(await bus!.listInhibitors(), 'block').length === 1,
      3000,
      'the block lock for the env activity',
    );
    assert.equal(
      ours(await bus.listInhibitors(), 'block').map((i) => i.why),
      ['env'],
      'the lock names env, not form',
    );

    await bus.emitPrepareForSleep(true);
    assert.is(
      await exited(clip, 5000),
      'SIGTERM',
      'the form activity was terminated although terminate_on_suspend is off',
    );
    await waitFor(
      async () => ours(await bus!.listInhibitors(), 'delay').length === 0,
      5000,
      'the delay lock to be released',
    );
    assert.is(other.exitCode, null, 'the env activity is left running');
    assert.is(other.signalCode, null);
    assert.equal(
      ((await a.client.status()).activities as Array<{ kind: string }>).map((x) => x.kind),
      ['env'],
    );
    assert.match(
      readLog(a.t),
      /clipboard clears: 1 terminated, 0 killed, 0 skipped; 1 activit\(ies\) left running without a sleep inhibitor/,
    );
    await bus.emitPrepareForSleep(false);
    await waitFor(async () => (await power(a.client)).phase === 'idle', 5000, 'resume');
  } finally {
    clip.kill('SIGKILL');
    other.kill('SIGKILL');
    await a.close();
  }
});

test('a PrepareForSleep from another sender is ignored', async () => {
  if (!bus) return;
  const a = await agentOnBus(true);
  try {
    const id = randomBytes(16);
    const key = randomBytes(32);
    await a.client.put(id, key, {});
    await bus.emitPrepareForSleep(true, { fromOtherSender: true });
    // Then logind's own suspend and resume: the bus hands the agent its messages in order, so once the resume
    // is handled the forged signal had its turn before them. Had it been obeyed, the key would have been
    // wiped by it: two suspends, or one whose wipe found no key.
    await bus.emitPrepareForSleep(true);
    await waitFor(async () => ((await power(a.client)).suspendCount as number) >= 1, 5000, "logind's suspend");
    await bus.emitPrepareForSleep(false);
    await waitFor(async () => (await power(a.client)).phase === 'idle', 5000, "logind's resume");
    assert.is((await power(a.client)).suspendCount, 1);
    assert.equal(
      readLog(a.t).match(/suspend: wiped \d+ key\(s\)/g),
      ['suspend: wiped 1 key(s)'],
      'the key was there for logind',
    );
    assert.not.match(readLog(a.t), /still being handled/);
  } finally {
    await a.close();
  }
});

test('100 suspend cycles with keys put between them: every cycle wipes everything', async () => {
  if (!bus) return;
  const a = await agentOnBus(true);
  try {
    for (let cycle = 1; cycle <= 100; cycle++) {
      const ids = Array.from({ length: 3 }, () => randomBytes(16));
      for (const id of ids) await a.client.put(id, randomBytes(32), { ttl: 600 });
      await bus.emitPrepareForSleep(true);
      await waitFor(
        async () => (await power(a.client)).suspendCount === cycle && (await power(a.client)).phase === 'sleeping',
        5000,
        `suspend ${cycle}`,
      );
      for (const id of ids) assert.is(await a.client.get(id), null, `cycle ${cycle}: every key wiped`);
      assert.is((await a.client.list()).length, 0, `cycle ${cycle}: nothing listed`);
      await bus.emitPrepareForSleep(false);
      await waitFor(async () => (await power(a.client)).phase === 'idle', 5000, `resume ${cycle}`);
    }
    await waitFor(
      async () => ours(await bus!.listInhibitors(), 'delay').length === 1,
      5000,
      'the delay lock after the last resume',
    );
  } finally {
    await a.close();
  }
});

/** `t` adds `other` as contact `name` (through the library; the key server flow is test/cli/teams.test.ts). */
async function befriend(t: CliEnv, other: CliEnv, name: string): Promise<void> {
  const key = await unlockVault(t.vault, Buffer.from(t.password));
  const p = identityPublic(other.vault);
  addContact(t.vault, key, { name, email: `${name}@example.test`, x25519: p.x25519, ed25519: p.ed25519 });
  wipe(key);
}

test('a shared container opened through the CLI: cached like any other key, wiped by the suspend signal', async () => {
  if (!bus) return;
  await waitFor(
    async () => (await bus!.listInhibitors()).every((i) => i.who !== 'stash'),
    5000,
    "the previous agent's locks to go",
  );
  const alice = cliEnv(); // no bus: only Bob's agent takes part
  const bob = cliEnv({ DBUS_SYSTEM_BUS_ADDRESS: bus.address, STASH_AGENT_TERMINATE_ON_SUSPEND: '1' });
  const run = async (t: CliEnv, args: string[], input?: string) => {
    const r = await t.run(args, { env: { STASH_PASSWORD_FILE: t.pwFile }, ...(input === undefined ? {} : { input }) });
    assert.is(r.code, 0, `${args.join(' ')}: ${r.stderr}`);
    return r;
  };
  const sessionNames = async () =>
    (
      JSON.parse((await bob.run(['vault', 'sessions', '--json'])).stdout) as { sessions: Array<{ name: string }> }
    ).sessions.map((x) => x.name);
  try {
    await alice.initVault();
    await bob.initVault();
    await befriend(alice, bob, 'bob');
    await befriend(bob, alice, 'alice');
    await run(alice, ['container', 'create', 'team']);
    await run(alice, ['set', 'team', 'TOKEN'], 'tok-shared');
    await run(alice, ['container', 'share', 'team', 'bob']);
    const file = join(alice.home, 'team.stash');
    await run(alice, ['container', 'export', 'team', file]);
    await run(bob, ['container', 'import', file]);
    await run(bob, ['vault', 'sessions', 'lock-all']);
    await run(bob, ['open', 'team']);
    assert.equal(await sessionNames(), ['(vault)', 'team'], "the shared container's key is cached");
    assert.is(
      (await bob.run(['get', 'team', 'TOKEN'])).stdout,
      'tok-shared',
      'served from the agent, no password given',
    );
    await waitFor(
      async () => ours(await bus!.listInhibitors(), 'delay').length === 1,
      5000,
      "the CLI-started agent's delay lock",
    );

    await bus.emitPrepareForSleep(true);
    await waitFor(async () => (await sessionNames()).length === 0, 5000, 'the suspend wipe');
    const after = await bob.run(['get', 'team', 'TOKEN']);
    assert.is(after.code, 64, `a password is needed again: ${after.stderr}`);
    assert.match(after.stderr, /a password is needed/);

    await bus.emitPrepareForSleep(false);
    await waitFor(
      async () => ours(await bus!.listInhibitors(), 'delay').length === 1,
      5000,
      'the delay lock after resume',
    );
    assert.is((await run(bob, ['get', 'team', 'TOKEN'])).stdout, 'tok-shared', "opened again with Bob's own password");
    assert.equal(await sessionNames(), ['(vault)', 'team'], 'and cached again');
  } finally {
    await alice.dispose();
    await bob.dispose();
  }
});

test('with no bus at all the agent serves normally and reports why protection is missing', async () => {
  // Needs no logind stand-in: the environment points at a bus that does not exist.
  const t = agentEnv();
  const proc = await startAgent(t);
  const c = await AgentClient.connect(agentEndpoint({ STASH_SESSION_AGENT_DIR: t.dir }));
  try {
    const id = randomBytes(16);
    const key = randomBytes(32);
    await c.put(id, key, {});
    const hit = await c.get(id);
    assert.ok(hit?.key.equals(key));
    await waitFor(
      async () => (await power(c)).listener !== undefined && (await power(c)).reason !== null,
      5000,
      'a reason',
    );
    const p = await power(c);
    assert.is(p.available, false);
    assert.type(p.reason, 'string');
    assert.ok((p.reason as string).length > 0);
    await waitFor(() => /suspend protection unavailable: /.test(readLog(t)), 5000, 'the log line');
  } finally {
    c.close();
    proc.kill('SIGTERM');
    await exited(proc);
    t.cleanup();
  }
});

test.run();
