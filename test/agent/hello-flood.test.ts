/**
 * A same-user client that floods the agent with handshakes, connections or
 * large sealed requests (issue 24, item 3). sodium-native 5.1.0's sodium_free
 * leaves the guarded mapping to the garbage collector, so an agent that took
 * guarded memory per HELLO piled up mappings until sodium_malloc failed and
 * the process aborted (20,000 pipelined HELLOs: 183 to 38,176 mappings in
 * 1.5 s, then SIGABRT and every cached key gone). Now no request path takes
 * guarded memory of its own (native/secure-pool.ts), and a connection may
 * send MAX_HELLOS HELLO frames.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { connect, createServer, type Socket } from 'node:net';
import { join } from 'node:path';
import { Agent, type Activities } from '../../src/agent/agent.js';
import { KeyCache } from '../../src/agent/cache.js';
import { AgentClient } from '../../src/agent/client.js';
import { AgentConnection } from '../../src/agent/connection.js';
import { MAX_HELLOS } from '../../src/agent/limits.js';
import { agentEndpoint } from '../../src/agent/paths.js';
import { loadSodium } from '../../src/native/sodium.js';
import {
  decodeReply,
  encodeFrame,
  encodeRequest,
  ephemeralKeys,
  FrameDecoder,
  MsgType,
  ProtocolErrorCode,
  SecureChannel,
  wipe,
  type Frame,
} from '../../src/protocol/index.js';
import { agentEnv, exited, readLog, sleep, startAgent, waitFor, type TestAgentEnv } from '../helpers/agent.js';

const linux = process.platform === 'linux';
/** Lines of /proc/PID/maps: one per mapping (a sodium_malloc buffer leaves about four until it is unmapped). */
const mapsCount = (pid: number): number => readFileSync(`/proc/${pid}/maps`, 'utf8').split('\n').length - 1;
/** Mappings the agent may gain over a flood: its heap grows a little, and the pool keeps what 9 connections used at once. */
const MAPS_MARGIN = 1000;

function openSocket(path: string): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const s = connect(path);
    s.once('connect', () => resolve(s));
    s.once('error', reject);
  });
}

/** A HELLO frame (the client side of its session is not needed: its secret key is wiped at once). */
function helloFrame(): Buffer {
  const ours = ephemeralKeys();
  wipe(ours.secretKey);
  const hello = encodeRequest({ type: 'hello', version: 2, publicKey: ours.publicKey });
  return encodeFrame(hello.type, hello.payload);
}

/** Writes `count` HELLO frames in one go and collects what comes back until the agent closes the connection. */
async function helloFlood(path: string, count: number): Promise<{ ok: number; errors: number[]; closed: boolean }> {
  const s = await openSocket(path);
  const decoder = new FrameDecoder();
  const result = { ok: 0, errors: [] as number[], closed: false };
  s.on('data', (d: Buffer) => {
    decoder.push(d);
    for (let f = decoder.next(); f; f = decoder.next()) {
      if (f.type === MsgType.HELLO_OK) result.ok++;
      else if (f.type === MsgType.ERROR) result.errors.push(f.payload.readUInt16LE(0));
    }
  });
  s.on('error', () => {}); // the agent closes while the rest of the flood is unwritten: EPIPE
  const hello = helloFrame();
  s.write(Buffer.concat(Array.from({ length: count }, () => hello)));
  result.closed = await new Promise<boolean>((resolve) => {
    const timer = setTimeout(() => resolve(false), 5000);
    s.once('close', () => {
      clearTimeout(timer);
      resolve(true);
    });
  });
  s.destroy();
  return result;
}

/** Samples the agent's mapping count every 5 ms until stop() (Linux only); stop() returns the highest seen. */
function mapsPeak(pid: number): { stop(): number } {
  let peak = linux ? mapsCount(pid) : 0;
  const timer = setInterval(() => {
    try {
      if (linux) peak = Math.max(peak, mapsCount(pid));
    } catch {
      /* the agent is gone: alive() says so */
    }
  }, 5);
  return {
    stop: () => {
      clearInterval(timer);
      return peak;
    },
  };
}

/** Polls until the agent's mappings are back within MAPS_MARGIN of `start` (the collector may still hold some); returns the last count. */
async function mapsSettle(pid: number, start: number): Promise<number> {
  let now = mapsCount(pid);
  for (let i = 0; i < 30 && now > start + MAPS_MARGIN; i++) {
    await sleep(100);
    now = mapsCount(pid);
  }
  return now;
}

async function withAgentAndKey(
  fn: (c: { t: TestAgentEnv; pid: number; path: string; stillCached(): Promise<void>; alive(): void }) => Promise<void>,
): Promise<void> {
  const t = agentEnv();
  const proc = await startAgent(t);
  const good = await AgentClient.connect(agentEndpoint({ STASH_SESSION_AGENT_DIR: t.dir }));
  const id = randomBytes(16);
  const key = randomBytes(32);
  try {
    await good.put(id, key, { ttl: 600 });
    await fn({
      t,
      pid: proc.pid!,
      path: join(t.dir, 'agent.sock'),
      alive: () =>
        assert.equal(
          [proc.exitCode, proc.signalCode],
          [null, null],
          `the agent is still running (stderr in ${t.logPath})`,
        ),
      async stillCached() {
        // A fresh connection: the first one may have been closed as idle meanwhile.
        const c = await AgentClient.connect(agentEndpoint({ STASH_SESSION_AGENT_DIR: t.dir }));
        try {
          const hit = await c.get(id);
          assert.ok(hit?.key.equals(key), 'the cached key is still there');
          wipe(hit!.key);
        } finally {
          c.close();
        }
      },
    });
  } finally {
    good.close();
    proc.kill('SIGTERM');
    await exited(proc);
    t.cleanup();
  }
}

test(`${MAX_HELLOS + 1} HELLOs in one write: ${MAX_HELLOS} are answered, the next is HANDSHAKE_LIMIT and the connection closes`, () =>
  withAgentAndKey(async ({ t, path, stillCached }) => {
    const r = await helloFlood(path, MAX_HELLOS + 1);
    assert.equal(r, { ok: MAX_HELLOS, errors: [ProtocolErrorCode.HANDSHAKE_LIMIT], closed: true });
    assert.match(
      readLog(t),
      new RegExp(`closing a connection from pid \\d+: more than ${MAX_HELLOS} HELLO frames on one connection`),
    );
    // Below the limit a new HELLO still replaces the session (docs/protocol.md): the last one is the one in use.
    const s = await openSocket(path);
    const decoder = new FrameDecoder();
    const frames: Frame[] = [];
    s.on('data', (d: Buffer) => {
      decoder.push(d);
      for (let f = decoder.next(); f; f = decoder.next()) frames.push(f);
    });
    const keys = [ephemeralKeys(), ephemeralKeys()];
    for (const k of keys) {
      const hello = encodeRequest({ type: 'hello', version: 2, publicKey: k.publicKey });
      s.write(encodeFrame(hello.type, hello.payload));
    }
    while (frames.length < 2) await sleep(10);
    const channel = SecureChannel.forClient(keys[1]!, (decodeReply(frames[1]!) as { publicKey: Buffer }).publicKey);
    wipe(keys[0]!.secretKey);
    s.write(channel.seal(encodeRequest({ type: 'forget', id: randomBytes(16) })));
    while (frames.length < 3) await sleep(10);
    const opened = channel.open(frames[2]!);
    assert.equal(decodeReply(opened.inner), { type: 'ack', count: 0 });
    opened.release();
    channel.destroy();
    s.destroy();
    await stillCached();
  }));

test('20,000 pipelined HELLOs on one connection, then 8 x 2,000: the agent keeps running, its cached key and its mappings', () =>
  withAgentAndKey(async ({ pid, path, stillCached, alive }) => {
    if (!linux) console.log('(no /proc/PID/maps here: the mapping count is not checked)');
    const start = linux ? mapsCount(pid) : 0;
    const sampler = mapsPeak(pid);
    const one = await helloFlood(path, 20_000);
    alive();
    const eight = await Promise.all(Array.from({ length: 8 }, () => helloFlood(path, 2000)));
    alive();
    for (const r of [one, ...eight]) {
      assert.ok(r.closed, 'the agent closed the flooding connection');
      assert.ok(r.ok <= MAX_HELLOS, `${r.ok} HELLOs answered on one connection (at most ${MAX_HELLOS})`);
      assert.ok(
        r.errors.every((c) => c === ProtocolErrorCode.HANDSHAKE_LIMIT),
        `errors: ${r.errors.join(', ')}`,
      );
    }
    await stillCached();
    const peak = sampler.stop();
    if (linux) {
      const end = await mapsSettle(pid, start);
      console.log(`HELLO floods: agent mappings ${start} before, at most ${peak} during, ${end} after`);
      assert.ok(
        peak <= start + MAPS_MARGIN,
        `agent mappings ${start} before the floods, up to ${peak} during (want at most ${start + MAPS_MARGIN})`,
      );
      assert.ok(
        end <= start + MAPS_MARGIN,
        `agent mappings ${start} before the floods, ${end} after (want at most ${start + MAPS_MARGIN})`,
      );
    }
    alive();
  }));

test('2,000 connections that each make a session and get the key, and 2,000 sealed PUTs larger than the scratch: no mapping per request', () =>
  withAgentAndKey(async ({ t, pid, path, stillCached, alive }) => {
    const start = linux ? mapsCount(pid) : 0;
    const started = Date.now();
    const sampler = mapsPeak(pid);
    // Eight clients at once, each connecting 250 times: a HELLO and a sealed GET per connection.
    await Promise.all(
      Array.from({ length: 8 }, async () => {
        for (let i = 0; i < 250; i++) await stillCached();
      }),
    );
    alive();
    // One connection pipelines PUTs of about 5 KiB (a 4,000-byte path and a 1 KiB key): each opens
    // beyond the channel's 4 KiB scratch. Two ids in turn, so each PUT also replaces a cached key.
    const s = await openSocket(path);
    const decoder = new FrameDecoder();
    const replies: Frame[] = [];
    s.on('data', (d: Buffer) => {
      decoder.push(d);
      for (let f = decoder.next(); f; f = decoder.next()) replies.push(f);
    });
    const ours = ephemeralKeys();
    const hello = encodeRequest({ type: 'hello', version: 2, publicKey: ours.publicKey });
    s.write(encodeFrame(hello.type, hello.payload));
    while (replies.length < 1) await sleep(10);
    const channel = SecureChannel.forClient(ours, (decodeReply(replies.shift()!) as { publicKey: Buffer }).publicKey);
    const ids = [randomBytes(16), randomBytes(16)];
    const puts: Buffer[] = [];
    for (let i = 0; i < 2000; i++) {
      puts.push(
        channel.seal(
          encodeRequest({ type: 'put', id: ids[i % 2]!, key: randomBytes(1024), path: 'p'.repeat(4000), ttl: 60 }),
        ),
      );
    }
    s.write(Buffer.concat(puts));
    for (let waited = 0; replies.length < 2000 && waited < 20_000; waited += 20) await sleep(20);
    assert.is(replies.length, 2000, 'every PUT answered');
    for (const f of replies.splice(0)) {
      const opened = channel.open(f);
      assert.equal(decodeReply(opened.inner), { type: 'ack', count: 1 });
      opened.release();
    }
    for (const id of ids) s.write(channel.seal(encodeRequest({ type: 'forget', id }))); // the good client's key stays
    while (replies.length < 2) await sleep(10);
    channel.destroy();
    s.destroy();
    alive();
    await stillCached();
    const peak = sampler.stop();
    console.log(`2,000 connections and 2,000 large PUTs in ${Date.now() - started} ms`);
    if (linux) {
      const end = await mapsSettle(pid, start);
      console.log(
        `connection churn and large PUTs: agent mappings ${start} before, at most ${peak} during, ${end} after`,
      );
      // The peak, not only the end: freed-but-not-collected buffers vanish once the collector runs.
      assert.ok(
        peak <= start + MAPS_MARGIN,
        `agent mappings ${start} before, up to ${peak} during (want at most ${start + MAPS_MARGIN})`,
      );
      assert.ok(
        end <= start + MAPS_MARGIN,
        `agent mappings ${start} before, ${end} after (want at most ${start + MAPS_MARGIN})`,
      );
    }
    assert.not.match(readLog(t), /INTERNAL|SECURE_MEMORY/);
  }));

/** The parts of the agent a connection needs, in this process, with no activities or power integration. */
function inProcessAgent(): Agent {
  const none: Activities = {
    register: () => {
      throw new Error('no activities here');
    },
    unregister: () => {},
    list: () => [],
    prune: () => 0,
    terminateAll: async () => ({ terminated: 0, killed: 0, skipped: 0, failed: 0 }),
    size: 0,
    clear: () => {},
  };
  return new Agent({
    cache: new KeyCache(),
    activities: none,
    power: null,
    preventSleep: false,
    terminateOnSuspend: false,
    log: () => {},
    describe: () => ({}),
  });
}

test('after warm-up, no request path calls sodium_malloc: handshakes, re-HELLOs, gets, puts, large frames, lists, forgets, closes', async () => {
  const agent = inProcessAgent();
  const home = agentEnv();
  const path = join(home.home, 'in-process.sock');
  // Counted after each AgentConnection's own close handler (added first, so run first).
  let opened = 0;
  let closed = 0;
  const server = createServer((socket) => {
    new AgentConnection(socket, process.pid, agent);
    opened++;
    socket.on('close', () => closed++);
  });
  await new Promise<void>((r) => server.listen(path, r));
  const sodium = loadSodium();
  const realMalloc = sodium.sodium_malloc;
  let mallocs = 0;
  const endpoint = { ...agentEndpoint({ STASH_SESSION_AGENT_DIR: home.dir }), path };
  const id = randomBytes(16);
  const key = randomBytes(32);
  const bigIds = Array.from({ length: 25 }, () => randomBytes(16));

  /** Everything a client can make the agent do, over `rounds` fresh connections. */
  async function workload(rounds: number): Promise<void> {
    for (let i = 0; i < rounds; i++) {
      const c = await AgentClient.connect(endpoint);
      try {
        await c.put(id, key, { ttl: 60 });
        const hit = await c.get(id);
        assert.ok(hit?.key.equals(key));
        wipe(hit!.key);
        // Larger than the 4 KiB scratch both ways: PUTs with long paths, and a LIST of them (about 100 KiB).
        for (const big of bigIds) await c.put(big, randomBytes(1024), { ttl: 60, path: `/${'x'.repeat(4000)}` });
        assert.ok((await c.list()).length >= bigIds.length);
        for (const big of bigIds) await c.forget(big);
        assert.ok((await c.get(randomBytes(16))) === null);
      } finally {
        c.close();
      }
      // Re-HELLOs up to the limit on a raw connection, each replacing the session.
      const s = await openSocket(path);
      let answered = 0;
      s.on('data', (d: Buffer) => {
        answered += d.length;
      });
      s.write(Buffer.concat(Array.from({ length: MAX_HELLOS }, helloFrame)));
      while (answered < MAX_HELLOS * (9 + 2 + 32 + 4)) await sleep(5);
      s.destroy();
    }
  }

  try {
    await workload(2); // warm-up: the pool takes what one connection needs at most
    sodium.sodium_malloc = ((size: number) => {
      mallocs++;
      return realMalloc(size);
    }) as typeof realMalloc;
    await workload(20);
    await waitFor(() => closed === opened, 5000, "the last connections' close events");
    assert.is(mallocs, 0, `sodium_malloc was called ${mallocs} times after warm-up`);
  } finally {
    sodium.sodium_malloc = realMalloc;
    await new Promise((r) => server.close(r));
    home.cleanup();
  }
});

test.run();
