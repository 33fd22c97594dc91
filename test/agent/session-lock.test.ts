/**
 * Session lock of the live agent process (`node bin/stash.js __agent`) on a
 * real dbus-daemon with python3-dbusmock's logind (test/fixtures/logind-bus.ts)
 * and a login session on it (test/fixtures/logind-session.ts), and on a
 * private session bus with a screensaver stand-in (test/fixtures/session-bus.ts):
 * Lock wipes every key at once (the agent's own figure: under 250 ms even on
 * a loaded CI machine; the 50 ms target is bench/suspend-wipe.js's) and keeps
 * new ones out until Unlock; a PUT racing the lock is never kept; LockedHint
 * alone does the same; a Lock from a stranger changes nothing; with
 * agent.lock_on_screen_lock off keys stay.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { randomBytes } from 'node:crypto';
import { AgentClient, type AgentError } from '../../src/agent/client.js';
import { agentEndpoint } from '../../src/agent/paths.js';
import { logindBusFacility, startLogindBus, type LogindBus } from '../fixtures/logind-bus.js';
import { addSession, connectionsOf, type LogindSession } from '../fixtures/logind-session.js';
import { startSessionBus } from '../fixtures/session-bus.js';
import { agentEnv, exited, readLog, sleep, startAgent, waitFor, type TestAgentEnv } from '../helpers/agent.js';
import { needFacility } from '../helpers/facility.js';
import type { ChildProcess } from 'node:child_process';

const facility = logindBusFacility();
const usable = process.platform === 'linux' && facility.available;
let bus: LogindBus | null = null;
let sessions = 0;

interface Running {
  t: TestAgentEnv;
  proc: ChildProcess;
  client: AgentClient;
  close(): Promise<void>;
}

type LockStatus = {
  enabled: boolean;
  locked: boolean;
  reason: string | null;
  lockCount: number;
  ignored: number;
  lockedBy: { source: string; signal: string } | null;
  lastLock: { source: string; signal: string; wiped: number; wipeLatencyMs: number } | null;
  sources: Array<{
    source: string;
    state: string;
    available: boolean;
    watching: string | null;
    reason: string | null;
    locked: boolean | null;
  }>;
};

async function lockStatus(c: AgentClient): Promise<LockStatus> {
  return (await c.status()).sessionLock as LockStatus;
}

/** A fresh login session on the stand-in and an agent that runs in it (XDG_SESSION_ID). */
async function agentInSession(env: NodeJS.ProcessEnv = {}): Promise<Running & { session: LogindSession }> {
  const session = await addSession(bus!, `t${++sessions}`);
  const t = agentEnv({ DBUS_SYSTEM_BUS_ADDRESS: bus!.address, XDG_SESSION_ID: session.id, ...env });
  const proc = await startAgent(t);
  const client = await AgentClient.connect(agentEndpoint({ STASH_SESSION_AGENT_DIR: t.dir }));
  return {
    t,
    proc,
    client,
    session,
    async close() {
      client.close();
      proc.kill('SIGTERM');
      await exited(proc);
      t.cleanup();
    },
  };
}

const logind = (s: LockStatus) => s.sources.find((x) => x.source === 'logind')!;

async function watching(c: AgentClient): Promise<void> {
  await waitFor(
    async () => logind(await lockStatus(c)).state === 'watching',
    5000,
    'the agent to watch its logind session',
  );
}

async function codeOf(p: Promise<unknown>): Promise<string> {
  try {
    await p;
  } catch (err) {
    return (err as AgentError).code;
  }
  return 'no error';
}

async function putSome(c: AgentClient, n: number): Promise<Buffer[]> {
  const ids = Array.from({ length: n }, () => randomBytes(16));
  for (const id of ids) await c.put(id, randomBytes(32), { ttl: 600 });
  return ids;
}

test.before(async () => {
  if (!needFacility(usable, 'logind stand-in', process.platform === 'linux' ? facility.reason : 'Linux only')) return;
  bus = await startLogindBus();
});

test.after(async () => {
  await bus?.stop();
});

test("Lock on the agent's session: every key gone at once, no key cached until Unlock", async () => {
  if (!bus) return;
  const a = await agentInSession();
  try {
    await watching(a.client);
    const st = await lockStatus(a.client);
    assert.is(st.enabled, true);
    assert.is(logind(st).watching, a.session.path, 'the agent found its own session');
    assert.is(logind(st).available, true);
    const ids = await putSome(a.client, 100);

    await a.session.lock();
    // The lock and the wipe are one step on the agent's JS thread: the first status that reports the lock
    // finds no key left. A wipe that waited for a timer or a poll would leave keys behind a reported lock.
    let keysAtLock = -1;
    await waitFor(
      async () => {
        const s = await a.client.status();
        if ((s.sessionLock as LockStatus).locked) keysAtLock = s.entries as number;
        return keysAtLock >= 0;
      },
      5000,
      'the lock',
    );
    assert.is(keysAtLock, 0, 'keys left when the agent first reported the lock');
    for (const id of ids) assert.is(await a.client.get(id), null, 'every get misses after the lock');
    assert.equal(await a.client.list(), []);
    const last = (await lockStatus(a.client)).lastLock!;
    assert.equal([last.source, last.signal, last.wiped], ['logind', 'Lock', 100]);
    // How soon: bench/suspend-wipe.js measures it against its 50 ms target; a loaded machine stretches it here.
    console.log(`  lock -> 100 keys wiped: ${last.wipeLatencyMs.toFixed(2)} ms after the signal was read`);
    assert.is(
      await codeOf(a.client.put(randomBytes(16), randomBytes(32), {})),
      'AGENT_SESSION_LOCKED',
      'no key is cached while locked',
    );
    assert.match(readLog(a.t), /session locked \(logind: Lock\): wiped 100 key\(s\) [0-9.]+ ms after the signal/);

    await a.session.unlock();
    await waitFor(async () => !(await lockStatus(a.client)).locked, 5000, 'the unlock');
    const id = randomBytes(16);
    await a.client.put(id, randomBytes(32), {});
    assert.ok(await a.client.get(id), 'keys are cached again after the unlock');
    assert.match(readLog(a.t), /session unlocked \(logind: Unlock\): caching keys again/);
  } finally {
    await a.close();
  }
});

test('LockedHint alone (a desktop that sends no Lock): true wipes and refuses, false resumes', async () => {
  if (!bus) return;
  const a = await agentInSession();
  try {
    await watching(a.client);
    const ids = await putSome(a.client, 3);
    await a.session.setLockedHint(true);
    await waitFor(async () => (await lockStatus(a.client)).locked, 5000, 'the lock');
    for (const id of ids) assert.is(await a.client.get(id), null);
    assert.equal((await lockStatus(a.client)).lockedBy, { source: 'logind', signal: 'LockedHint' });
    assert.is(await codeOf(a.client.put(randomBytes(16), randomBytes(32), {})), 'AGENT_SESSION_LOCKED');
    await a.session.setLockedHint(false);
    await waitFor(async () => !(await lockStatus(a.client)).locked, 5000, 'the unlock');
    await a.client.put(randomBytes(16), randomBytes(32), {});
  } finally {
    await a.close();
  }
});

test('a PUT racing the lock is never kept: before the lock it is wiped, after it refused', async () => {
  if (!bus) return;
  const a = await agentInSession();
  try {
    await watching(a.client);
    let raced = 0;
    for (let cycle = 1; cycle <= 20; cycle++) {
      const acked: Buffer[] = [];
      let refused = false;
      // PUTs back to back on one connection while logind emits the Lock.
      const locking = a.session.lock();
      for (let i = 0; i < 5000 && !refused; i++) {
        const id = randomBytes(16);
        const code = await codeOf(a.client.put(id, randomBytes(32), { ttl: 600 }));
        if (code === 'no error') acked.push(id);
        else if (code === 'AGENT_SESSION_LOCKED') refused = true;
        else assert.unreachable(`cycle ${cycle}: unexpected ${code}`);
      }
      await locking;
      assert.ok(refused, `cycle ${cycle}: a PUT after the lock was refused`);
      if (acked.length > 0) raced++;
      assert.equal(await a.client.list(), [], `cycle ${cycle}: nothing cached after the lock`);
      for (const id of acked)
        assert.is(await a.client.get(id), null, `cycle ${cycle}: a key acknowledged just before the lock is gone`);
      await a.session.unlock();
      await waitFor(async () => !(await lockStatus(a.client)).locked, 5000, `unlock ${cycle}`);
    }
    assert.ok(raced > 0, 'some PUTs were acknowledged moments before the lock arrived');
    assert.is((await lockStatus(a.client)).lockCount, 20);
  } finally {
    await a.close();
  }
});

test('a Lock from a connection that does not own org.freedesktop.login1 changes nothing', async () => {
  if (!bus) return;
  const a = await agentInSession();
  try {
    await watching(a.client);
    const id = randomBytes(16);
    const key = randomBytes(32);
    await a.client.put(id, key, {});
    // Broadcast: dbus-daemon delivers it to no rule that names logind as sender.
    await a.session.forge('Lock');
    // Sent to the agent's own connections: it reaches sd-bus, and the owner check refuses it.
    const targets = await a.session.forge('Lock', { toPid: a.proc.pid! });
    assert.ok(targets.length >= 2, `the agent has its power and lock connections on the bus: ${targets.join(', ')}`);
    await waitFor(
      async () => (await lockStatus(a.client)).ignored >= 1,
      5000,
      'the forged Lock to be seen and ignored',
    );
    await sleep(200);
    const st = await lockStatus(a.client);
    assert.is(st.locked, false);
    assert.is(st.lockCount, 0);
    const hit = await a.client.get(id);
    assert.ok(hit?.key.equals(key), 'the key is still cached');
    assert.match(readLog(a.t), /ignored Lock from :1\.\d+: it does not own the name it speaks for/);
  } finally {
    await a.close();
  }
});

test('with agent.lock_on_screen_lock off (STASH_AGENT_LOCK_ON_SCREEN_LOCK=0) keys stay cached through a Lock', async () => {
  if (!bus) return;
  const a = await agentInSession({ STASH_AGENT_LOCK_ON_SCREEN_LOCK: '0' });
  try {
    const ids = await putSome(a.client, 3);
    await a.session.lock();
    await a.session.setLockedHint(true);
    await sleep(400);
    const st = await lockStatus(a.client);
    assert.is(st.enabled, false);
    assert.equal(st.sources, []);
    assert.match(st.reason!, /agent\.lock_on_screen_lock is off/);
    for (const id of ids) assert.ok(await a.client.get(id), 'still cached');
    await a.client.put(randomBytes(16), randomBytes(32), {});
    assert.equal(((await a.client.status()).config as { lockOnScreenLock: unknown }).lockOnScreenLock, {
      value: false,
      source: 'environment',
      from: 'STASH_AGENT_LOCK_ON_SCREEN_LOCK',
    });
  } finally {
    await a.session.setLockedHint(false);
    await a.close();
  }
});

test('no session for the agent: the logind source says why and retries; the agent serves normally', async () => {
  if (!bus) return;
  const t = agentEnv({ DBUS_SYSTEM_BUS_ADDRESS: bus.address });
  const proc = await startAgent(t);
  const c = await AgentClient.connect(agentEndpoint({ STASH_SESSION_AGENT_DIR: t.dir }));
  try {
    await waitFor(async () => logind(await lockStatus(c)).reason !== null, 5000, 'a reason');
    const st = await lockStatus(c);
    assert.is(logind(st).state, 'unavailable');
    assert.match(
      logind(st).reason!,
      /no logind session for pid \d+ \(.*GetSessionByPID.*\) and XDG_SESSION_ID is not set/,
      logind(st).reason!,
    );
    const saver = st.sources.find((x) => x.source === 'screensaver')!;
    assert.is(saver.available, false);
    assert.match(saver.reason!, /cannot connect to the session bus at unix:path=.*no-session-bus/);
    await c.put(randomBytes(16), randomBytes(32), {});
  } finally {
    c.close();
    proc.kill('SIGTERM');
    await exited(proc);
    t.cleanup();
  }
});

test('logind restarts: the source is unavailable while it is gone, and believes the new owner afterwards', async () => {
  if (!bus) return;
  const a = await agentInSession();
  try {
    await watching(a.client);
    const ids = await putSome(a.client, 3);
    await bus.stopLogind();
    await waitFor(async () => !logind(await lockStatus(a.client)).available, 5000, 'the source to notice logind left');
    assert.match(logind(await lockStatus(a.client)).reason!, /org\.freedesktop\.login1 left the system bus/);
    await bus.startLogind();
    // The new stand-in knows no session until it is told: logind restores its sessions the same way.
    const again = await addSession(bus, a.session.id);
    await waitFor(
      async () => logind(await lockStatus(a.client)).available,
      5000,
      'the source to follow the new logind',
    );
    for (const id of ids) assert.ok(await a.client.get(id), 'a logind restart wipes nothing');
    await again.lock();
    await waitFor(async () => (await lockStatus(a.client)).locked, 5000, 'a Lock from the new logind');
    for (const id of ids) assert.is(await a.client.get(id), null);
  } finally {
    await a.close();
  }
});

test('session bus screensaver: ActiveChanged(true) from its owner wipes, from a stranger changes nothing, (false) resumes', async () => {
  if (!bus) return;
  const session = await startSessionBus();
  const t = agentEnv({ DBUS_SESSION_BUS_ADDRESS: session.address });
  let proc: ChildProcess | null = null;
  let c: AgentClient | null = null;
  try {
    const gnome = await session.startScreenSaver('org.gnome.ScreenSaver');
    proc = await startAgent(t);
    c = await AgentClient.connect(agentEndpoint({ STASH_SESSION_AGENT_DIR: t.dir }));
    const saver = async () => (await lockStatus(c!)).sources.find((x) => x.source === 'screensaver')!;
    await waitFor(async () => (await saver()).available, 5000, 'the screensaver source');
    assert.match((await saver()).watching!, /org\.gnome\.ScreenSaver \(:1\.\d+\)/);
    const ids = await putSome(c, 5);

    await session.forgeActiveChanged('org.gnome.ScreenSaver', true);
    for (const name of await connectionsOf(session, proc.pid!))
      await session.forgeActiveChanged('org.gnome.ScreenSaver', true, name);
    await waitFor(async () => (await lockStatus(c!)).ignored >= 1, 5000, 'the forged ActiveChanged to be ignored');
    for (const id of ids) assert.ok(await c.get(id), 'a forged ActiveChanged wiped nothing');

    await gnome.activeChanged(true);
    await waitFor(async () => (await lockStatus(c!)).locked, 5000, 'the lock');
    for (const id of ids) assert.is(await c.get(id), null);
    assert.equal((await lockStatus(c)).lockedBy, {
      source: 'screensaver',
      signal: 'org.gnome.ScreenSaver.ActiveChanged',
    });
    assert.is(await codeOf(c.put(randomBytes(16), randomBytes(32), {})), 'AGENT_SESSION_LOCKED');
    await gnome.activeChanged(false);
    await waitFor(async () => !(await lockStatus(c!)).locked, 5000, 'the unlock');
    await c.put(randomBytes(16), randomBytes(32), {});
  } finally {
    c?.close();
    proc?.kill('SIGTERM');
    if (proc) await exited(proc);
    t.cleanup();
    await session.stop();
  }
});

test.run();
