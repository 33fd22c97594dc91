/**
 * The real agent process (`node bin/stash.js __agent`) driven through real
 * Unix sockets by the real client.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, statSync, unlinkSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { AgentClient, type AgentError } from '../../src/agent/client.js';
import { agentEndpoint } from '../../src/agent/paths.js';
import { keySlots, SLOT_BYTES, SLOTS_PER_SLAB } from '../../src/native/key-slots.js';
import { encodeFrame, encodeRequest, MsgType, wipe } from '../../src/protocol/index.js';
import {
  agentEnv,
  exited,
  readLog,
  running,
  startAgent,
  stashBin,
  waitFor,
  type TestAgentEnv,
} from '../helpers/agent.js';
import { haveCommand, isRoot, needFacility } from '../helpers/facility.js';
import { asNobody, readableCopy } from '../helpers/readable-copy.js';

const sodium = createRequire(import.meta.url)('sodium-native') as typeof import('sodium-native');

/**
 * How long a test waits for a 2 s TTL to run out: the expiry itself is exact (the agent's clocks), so this only
 * bounds a stuck test; a whole CI run at load 26 delayed single requests by seconds.
 */
const TTL_BOUND_MS = 20_000;

function endpointOf(dir: string) {
  return agentEndpoint({ STASH_SESSION_AGENT_DIR: dir });
}

async function errorCode(p: Promise<unknown>): Promise<string> {
  try {
    await p;
  } catch (err) {
    return (err as AgentError).code;
  }
  return 'no error';
}

/** A live agent (with `env` added to its environment) and a connected client for the length of `fn`; both stopped after. */
async function withAgentClient(
  env: NodeJS.ProcessEnv,
  fn: (c: AgentClient, t: TestAgentEnv, proc: ChildProcess) => Promise<void>,
): Promise<void> {
  const t = agentEnv(env);
  const proc = await startAgent(t);
  const c = await AgentClient.connect(endpointOf(t.dir));
  try {
    await fn(c, t, proc);
  } finally {
    c.close();
    proc.kill('SIGTERM');
    await exited(proc);
    t.cleanup();
  }
}

/** Asserts that every promise of an allSettled batch was fulfilled, naming the rejections. */
function allFulfilled(results: Array<PromiseSettledResult<unknown>>): void {
  const rejected = results.flatMap((r, i) => (r.status === 'rejected' ? [`#${i}: ${String(r.reason)}`] : []));
  assert.equal(rejected, [], 'every request succeeded');
}

test('concurrent first requests on a new client share one handshake', () =>
  withAgentClient({}, async (c) => {
    const [a, b] = [randomBytes(16), randomBytes(16)];
    // Nothing awaited in between: without a shared HELLO the second replaces the session under the first.
    allFulfilled(
      await Promise.allSettled([
        c.put(a, randomBytes(32), { ttl: 60 }),
        c.get(b),
        c.put(b, randomBytes(32), { ttl: 60 }),
        c.list(),
      ]),
    );
    assert.ok(await c.get(a));
    assert.ok(await c.get(b));
  }));

/** Waits until the agent's only open connection is the one asking: it has closed every other. */
async function othersClosed(t: TestAgentEnv): Promise<void> {
  await waitFor(
    async () => {
      const probe = await AgentClient.connect(endpointOf(t.dir));
      try {
        return (await probe.status()).connections === 1;
      } finally {
        probe.close();
      }
    },
    10_000,
    'the agent to close the idle connection',
  );
}

test('a connection the agent closed as idle is reopened by the next request; activity tokens stay valid', () =>
  withAgentClient({ STASH_AGENT_CONNECTION_IDLE_SECONDS: '0.5' }, async (c, t) => {
    // The flow of a first command: a miss, an unlock activity, then a long wait at the password prompt.
    const id = randomBytes(16);
    assert.is(await c.get(id), null);
    const token = await c.registerActivity(process.pid, 'unlock');
    await othersClosed(t);
    await c.unregisterActivity(process.pid, token);
    await c.put(id, randomBytes(32), { ttl: 60 });
    assert.ok(await c.get(id), 'the key was cached over the new connection');
    // Two requests at once after the next idle close share one reconnection.
    await othersClosed(t);
    allFulfilled(await Promise.allSettled([c.get(id), c.list()]));
  }));

test('put/get/forget/forget-all/list round trips through a live agent', () =>
  withAgentClient({}, async (c, _t, proc) => {
    const a = randomBytes(16);
    const b = randomBytes(16);
    const keyA = randomBytes(32);
    await c.put(a, keyA, { path: '/vault/containers/work.stash', ttl: 60 });
    await c.put(b, randomBytes(32), {});
    const hit = await c.get(a);
    assert.ok(hit?.key.equals(keyA));
    assert.is(hit!.ttl, 60);
    // Secure memory: a slot of the client's key pool, a sodium_malloc slab (native/key-slots.ts; the test below).
    assert.is(hit!.key.buffer.byteLength, SLOT_BYTES * SLOTS_PER_SLAB, 'the client returns keys in secure memory');
    assert.is(await c.get(randomBytes(16)), null, 'unknown id is a cache miss');
    const list = await c.list();
    assert.is(list.length, 2);
    const la = list.find((e) => e.id.equals(a))!;
    assert.is(la.path, '/vault/containers/work.stash');
    assert.is(list.find((e) => e.id.equals(b))!.ttl, 900, 'default TTL');
    assert.ok(await c.forget(a));
    assert.not.ok(await c.forget(a));
    assert.is(await c.get(a), null);
    assert.is(await c.forgetAll(), 1);
    assert.equal(await c.list(), []);
    const status = await c.status();
    assert.is(status.pid, proc.pid);
    assert.is(status.entries, 0);
  }));

test('get returns each key in a slot of the secure key pool: wipe() zeroes it and gives the slot back', () =>
  withAgentClient({}, async (c) => {
    const id = randomBytes(16);
    const key = randomBytes(32);
    await c.put(id, key, { ttl: 60 });
    const before = keySlots.stats().inUse;
    const hits = [await c.get(id), await c.get(id)];
    assert.is(keySlots.stats().inUse, before + 2);
    for (const hit of hits) {
      assert.ok(hit?.key.equals(key) && hit.ttl === 60);
      assert.is(hit!.key.buffer.byteLength, SLOT_BYTES * SLOTS_PER_SLAB, 'a view of a sodium_malloc slab');
    }
    assert.is.not(hits[0]!.key.byteOffset, hits[1]!.key.byteOffset, 'one slot per key');
    for (const hit of hits) {
      wipe(hit!.key);
      assert.ok(
        hit!.key.every((b) => b === 0),
        'wipe zeroes it',
      );
    }
    assert.is(keySlots.stats().inUse, before);
    assert.ok(keySlots.stats().freeSlotsZero);
  }));

test("getInto copies the key into the caller's secure buffer, zeroes the rest, and refuses plain or short buffers", () =>
  withAgentClient({}, async (c) => {
    const id = randomBytes(16);
    const key = randomBytes(32);
    await c.put(id, key, { ttl: 60 });
    const out = sodium.sodium_malloc(48);
    try {
      out.fill(0xaa);
      assert.equal(await c.getInto(id, out), { length: 32, ttl: 60 });
      assert.ok(out.subarray(0, 32).equals(key));
      assert.ok(
        out.subarray(32).every((b) => b === 0),
        'bytes past the key are zeroed',
      );
      out.fill(0xaa);
      assert.is(await c.getInto(randomBytes(16), out), null, 'a miss');
      assert.ok(
        out.every((b) => b === 0),
        'a miss leaves the buffer zeroed',
      );
      const short = sodium.sodium_malloc(16);
      try {
        short.fill(0xaa);
        assert.is(await errorCode(c.getInto(id, short)), 'AGENT_BUFFER_TOO_SMALL');
        assert.ok(
          short.every((b) => b === 0),
          'no part of the key lands in a short buffer',
        );
      } finally {
        wipe(short);
      }
      assert.is(await errorCode(c.getInto(id, Buffer.alloc(64))), 'AGENT_INSECURE_BUFFER');
      assert.equal(await c.getInto(id, out), { length: 32, ttl: 60 }, 'the connection still serves after the refusals');
    } finally {
      wipe(out);
    }
  }));

test('sliding TTL with small TTLs; list does not extend; non-positive TTL rejected', () =>
  withAgentClient({}, async (c, t) => {
    const slide = randomBytes(16);
    const still = randomBytes(16);
    // `still` is put last: once it has expired, so would `slide` have, but for its reads.
    await c.put(slide, randomBytes(32), { ttl: 2 });
    await c.put(still, randomBytes(32), { ttl: 2 });
    const listed = async (): Promise<string[]> => (await c.list()).map((e) => e.id.toString('hex'));
    // Read `slide` and list both until `still` expires: a list that extended a TTL would keep `still`
    // (and time this out), a get that did not slide would lose `slide` first.
    let reads = 0;
    await waitFor(
      async () => {
        assert.ok(await c.get(slide), `the entry read ${reads++} times is still there`);
        return !(await listed()).includes(still.toString('hex'));
      },
      TTL_BOUND_MS,
      'the entry only listed to expire',
    );
    assert.ok((await listed()).includes(slide.toString('hex')), 'the entry read keeps sliding past its first expiry');
    // Not read any more, `slide` expires too, and the agent prunes it.
    await waitFor(async () => (await c.list()).length === 0, TTL_BOUND_MS, 'the entry read to expire once reads stop');
    assert.is(await c.get(slide), null);

    // A client can only send TTL <= 0 by hand: the encoder refuses it.
    const raw = encodeRequest({ type: 'put', id: randomBytes(16), key: randomBytes(32), path: null, ttl: 5 });
    raw.payload.writeInt32LE(0, raw.payload.length - 4);
    const { createConnection } = await import('node:net');
    const s = createConnection(join(t.dir, 'agent.sock'));
    // sealed-only type sent plain is refused, the connection stays usable
    s.write(encodeFrame(raw.type, raw.payload));
    const reply = await new Promise<Buffer>((r) => s.once('data', r));
    assert.is(reply[4], MsgType.ERROR);
    assert.is(reply.readUInt16LE(9), 4, 'UNSUPPORTED_TYPE outside a sealed frame');
    s.destroy();
    assert.is(await errorCode(c.put(randomBytes(16), randomBytes(32), { ttl: 0 })), 'AGENT_NON_POSITIVE_TTL');
  }));

test('socket folder is 0700 and the socket 0600; an open folder is refused', async () => {
  const t = agentEnv();
  const proc = await startAgent(t);
  try {
    assert.is(statSync(t.dir).mode & 0o777, 0o700);
    assert.is(statSync(join(t.dir, 'agent.sock')).mode & 0o777, 0o600);
  } finally {
    proc.kill('SIGTERM');
    await exited(proc);
  }
  chmodSync(t.dir, 0o755);
  const bad = spawn(process.execPath, [stashBin, '__agent'], { env: t.env, stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  bad.stderr!.on('data', (d) => {
    stderr += d;
  });
  assert.is(await exited(bad), 77);
  assert.match(stderr, /mode 0755; it must be 0700/);
  t.cleanup();
});

test('a client running as another uid is refused and logged', async () => {
  if (!needFacility(isRoot && haveCommand('setpriv'), 'second uid', 'needs root and setpriv')) return;
  const t = agentEnv();
  const proc = await startAgent(t);
  try {
    // startAgent returns once the socket file exists; the agent sets its mode (0600) just after listen().
    // Wait until it answers, or the chmod below can come first and be undone (CI, 2026-11-23: EACCES).
    const ready = await AgentClient.connect(endpointOf(t.dir));
    await ready.list();
    ready.close();
    // open the folder and socket up for the test only, so that nobody can reach connect()
    chmodSync(t.home, 0o755);
    chmodSync(t.dir, 0o755);
    chmodSync(join(t.dir, 'agent.sock'), 0o666);
    const script = `const s=require('net').connect(${JSON.stringify(join(t.dir, 'agent.sock'))});
      s.on('connect',()=>{s.write(Buffer.from('5342583205000000','hex'))});
      let got=0;s.on('data',d=>{got+=d.length});
      s.on('close',()=>{console.log('closed after '+got+' bytes');process.exit(0)});
      s.on('error',e=>{console.log('error '+e.code);process.exit(0)});
      setTimeout(()=>{console.log('still open');process.exit(1)},3000)`;
    const copy = readableCopy(); // a Node binary nobody can run (a fetched Node line may sit in a private folder)
    const [setpriv, ...asUser] = asNobody;
    const nobody = spawn(setpriv, [...asUser, copy.node, '-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    nobody.stdout!.on('data', (d) => {
      out += d;
    });
    assert.is(await exited(nobody), 0, out);
    copy.remove();
    assert.match(out, /closed after 0 bytes|error (ECONNRESET|EPIPE)/, out);
    await waitFor(() => /refused a connection from uid 65534/.test(readLog(t)), 3000, 'refusal in the log');
    // and our own uid is still served
    const c = await AgentClient.connect(endpointOf(t.dir));
    await c.put(randomBytes(16), randomBytes(32), {});
    c.close();
  } finally {
    proc.kill('SIGTERM');
    await exited(proc);
    t.cleanup();
  }
});

test('stop clears everything and exits; SIGTERM wipes and exits', async () => {
  const t = agentEnv();
  let proc = await startAgent(t);
  let c = await AgentClient.connect(endpointOf(t.dir));
  await c.put(randomBytes(16), randomBytes(32), {});
  await c.stop();
  assert.is(await exited(proc), 0);
  assert.not.ok(existsSync(join(t.dir, 'agent.sock')), 'socket removed on exit');
  assert.match(readLog(t), /agent exiting \(stop requested\); wiped 1 key/);
  c.close();

  proc = await startAgent(t);
  c = await AgentClient.connect(endpointOf(t.dir));
  await c.put(randomBytes(16), randomBytes(32), {});
  await c.put(randomBytes(16), randomBytes(32), {});
  proc.kill('SIGTERM');
  assert.is(await exited(proc), 0);
  assert.match(readLog(t), /agent exiting \(SIGTERM\); wiped 2 key/);
  c.close();
  t.cleanup();
});

test('idle exit after the idle time with nothing cached', async () => {
  const t = agentEnv({ STASH_AGENT_IDLE_SECONDS: '1' });
  const proc = await startAgent(t);
  const c = await AgentClient.connect(endpointOf(t.dir));
  // A key that outlives the idle time twice over: an agent that counted it as idle would exit holding it.
  await c.put(randomBytes(16), randomBytes(32), { ttl: 2 });
  c.close();
  assert.is(await exited(proc), 0);
  // The exit line counts the keys it wiped: 0, so the agent waited for the key to expire.
  const log = readLog(t);
  const expired = log.indexOf('expired 1 cached key(s)');
  const exit = log.indexOf('agent exiting (idle for 1 s); wiped 0 key(s)');
  assert.ok(expired >= 0 && exit > expired, `the key expired, then the agent went idle and exited:\n${log}`);
  t.cleanup();
});

test('an open connection keeps an agent with nothing cached from its idle exit', async () => {
  const t = agentEnv({ STASH_AGENT_IDLE_SECONDS: '1' });
  const proc = await startAgent(t);
  const c = await AgentClient.connect(endpointOf(t.dir));
  try {
    assert.is(await c.get(randomBytes(16)), null);
    // The agent's own clock: rounds of its periodic check, whose idle test would end it. Once they have covered
    // the idle time twice over, the connection has kept it running (a status request fails once it has gone).
    const rounds = async (): Promise<{ intervalMs: number; rounds: number }> =>
      (await c.status()).housekeeping as { intervalMs: number; rounds: number };
    const start = await rounds();
    const enough = start.rounds + Math.ceil(2000 / start.intervalMs) + 1;
    await waitFor(async () => (await rounds()).rounds >= enough, 20_000, 'rounds of the idle check for 2 s');
    assert.ok(running(proc.pid!), 'a command between its cache miss and its put is not cut off');
    await c.put(randomBytes(16), randomBytes(32), { ttl: 1 });
  } finally {
    c.close();
  }
  assert.is(await exited(proc, 6000), 0, 'idle exit once the connection is gone and the key expired');
  t.cleanup();
});

test('the agent exits when its socket file is removed or taken over', async () => {
  const t = agentEnv();
  // The agent looks once a second; the bound is for a loaded machine (a whole CI run at load 26 went past 4 s).
  let proc = await startAgent(t);
  unlinkSync(join(t.dir, 'agent.sock'));
  assert.is(await exited(proc, 30_000), 0);
  assert.match(readLog(t), /socket file removed or replaced/);
  proc = await startAgent(t);
  // startAgent returns once the kernel accepts a connection, which can be before the agent has taken
  // the inode of its socket file (a loaded machine delays it): an answer to a request comes after.
  const c = await AgentClient.connect(endpointOf(t.dir));
  await c.status();
  c.close();
  unlinkSync(join(t.dir, 'agent.sock'));
  const impostor = createServer().listen(join(t.dir, 'agent.sock'));
  try {
    assert.is(await exited(proc, 30_000), 0);
  } finally {
    // A listening impostor left behind kept the suite's process alive until its 600 s timeout.
    impostor.close();
    proc.kill('SIGKILL');
    t.cleanup();
  }
});

test('a stale socket file from a dead agent is replaced', async () => {
  const t = agentEnv();
  const dead = await startAgent(t);
  dead.kill('SIGKILL');
  await exited(dead);
  assert.ok(existsSync(join(t.dir, 'agent.sock')), 'SIGKILL leaves the socket file behind');
  // startAgent returns at once (the stale file exists); wait for a live listener instead
  const proc = await startAgent(t);
  await waitFor(
    async () => {
      try {
        const c = await AgentClient.connect(endpointOf(t.dir));
        const s = await c.status();
        c.close();
        return s.pid === proc.pid;
      } catch {
        return false;
      }
    },
    5000,
    'the new agent to answer',
  );
  proc.kill('SIGTERM');
  await exited(proc);
  t.cleanup();
});

test('a second agent exits quietly when one is already serving', async () => {
  const t = agentEnv();
  const first = await startAgent(t);
  const second = spawn(process.execPath, [stashBin, '__agent'], { env: t.env, stdio: 'ignore' });
  assert.is(await exited(second), 0);
  assert.is(first.exitCode, null);
  first.kill('SIGTERM');
  await exited(first);
  t.cleanup();
});

test('a peer speaking another protocol version is reported clearly', async () => {
  const t = agentEnv();
  mkdirSync(t.dir, { recursive: true, mode: 0o700 });
  const fake = createServer((s) => s.on('data', () => s.write(Buffer.from('SBX3\x81\x00\x00\x00\x00', 'latin1'))));
  await new Promise<void>((r) => fake.listen(join(t.dir, 'agent.sock'), r));
  const c = await AgentClient.connect(endpointOf(t.dir));
  const code = await errorCode(c.get(randomBytes(16)));
  assert.is(code, 'AGENT_VERSION');
  c.close();
  fake.close();
  t.cleanup();
});

test('__agent rejects arguments and an invalid config file', async () => {
  const t = agentEnv();
  const p = spawn(process.execPath, [stashBin, '__agent', '--bogus'], { env: t.env, stdio: 'ignore' });
  assert.is(await exited(p), 64);
  const cfg = join(t.home, 'bad.toml');
  writeFileSync(cfg, '[agent]\nprevent_sleep = 3\n');
  const q = spawn(process.execPath, [stashBin, '__agent'], {
    env: { ...t.env, STASH_CONFIG: cfg },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let err = '';
  q.stderr!.on('data', (d) => {
    err += d;
  });
  assert.is(await exited(q), 78);
  assert.match(err, /bad\.toml:2: agent\.prevent_sleep must be a boolean/);
  t.cleanup();
});

test.run();
