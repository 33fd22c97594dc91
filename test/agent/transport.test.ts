/**
 * The client's two transports (src/agent/transport.ts) against a real agent
 * process and against misbehaving agents in their own processes
 * (test/fixtures/fake-agent.cjs): the blocking one (the addon's connect, send
 * and poll-bounded receive) must give the same answers as node:net, reassemble
 * a reply that arrives a byte at a time, give up on a silent agent after its
 * reply timeout, report a closed connection and another protocol version, and
 * reconnect after the agent closed an idle connection.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { closeSync, mkdirSync, openSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { AgentClient, type TransportKind } from '../../src/agent/client.js';
import { agentEndpoint, type Endpoint } from '../../src/agent/paths.js';
import { transportChoice } from '../../src/agent/transport.js';
import { loadBinding } from '../../src/native/binding.js';
import { wipe } from '../../src/protocol/index.js';
import { agentEnv, exited, startAgent, waitFor, type TestAgentEnv } from '../helpers/agent.js';

const fakeAgent = join(process.cwd(), 'test', 'fixtures', 'fake-agent.cjs');
const native = loadBinding();
const kinds: TransportKind[] = ['blocking', 'net'];

const endpointOf = (dir: string): Endpoint => agentEndpoint({ STASH_SESSION_AGENT_DIR: dir });

async function failure(p: Promise<unknown>): Promise<{ code: string; message: string }> {
  try {
    await p;
  } catch (err) {
    return { code: (err as { code?: string }).code ?? 'no code', message: (err as Error).message };
  }
  return { code: 'no error', message: '' };
}

/** A fake agent (MODE) serving SOCKET in a child process, ready when this resolves. */
async function startFake(mode: string, socket: string, target = ''): Promise<ChildProcess> {
  const proc = spawn(process.execPath, [fakeAgent, mode, socket, target], { stdio: ['ignore', 'pipe', 'inherit'] });
  const [data] = (await Promise.race([once(proc.stdout!, 'data'), once(proc, 'exit')])) as [Buffer | number];
  assert.ok(Buffer.isBuffer(data) && data.toString() === 'ready\n', `fake agent ${mode} started`);
  return proc;
}

async function withAgent(env: NodeJS.ProcessEnv, fn: (t: TestAgentEnv) => Promise<void>): Promise<void> {
  const t = agentEnv(env);
  const proc = await startAgent(t);
  try {
    await fn(t);
  } finally {
    proc.kill('SIGTERM');
    await exited(proc);
    t.cleanup();
  }
}

test('the addon has the blocking socket calls on this platform, and `auto` picks them', () =>
  withAgent({}, async (t) => {
    assert.type(native.unixConnect, 'function');
    const auto = await AgentClient.connect(endpointOf(t.dir), 2000, { transport: 'auto' });
    const plain = await AgentClient.connect(endpointOf(t.dir));
    try {
      assert.is(auto.transportUsed, 'blocking');
      assert.is(plain.transportUsed, 'net', 'library callers get node:net unless they ask');
    } finally {
      auto.close();
      plain.close();
    }
  }));

test('blocking and net give the same answers: put, get, list, forget, status, activities', () =>
  withAgent({}, async (t) => {
    const id = randomBytes(16);
    const key = randomBytes(32);
    const blocking = await AgentClient.connect(endpointOf(t.dir), 2000, { transport: 'blocking' });
    const net = await AgentClient.connect(endpointOf(t.dir), 2000, { transport: 'net' });
    try {
      await blocking.put(id, key, { ttl: 60, path: '/x/work.stash' });
      for (const c of [blocking, net]) {
        const got = await c.get(id);
        assert.ok(got, `${c.transportUsed}: a hit`);
        assert.ok(got!.key.equals(key), `${c.transportUsed}: the same key`);
        wipe(got!.key);
        assert.is(await c.get(randomBytes(16)), null, `${c.transportUsed}: a miss`);
        const list = await c.list();
        assert.is(list.length, 1);
        assert.is(list[0]!.path, '/x/work.stash');
        assert.is((await c.status()).pid, blocking.agentPid);
        const token = await c.registerActivity(process.pid, 'open');
        await c.unregisterActivity(process.pid, token);
      }
      // Requests started together on the blocking transport are answered one after another, in order.
      const [a, b, miss] = await Promise.all([blocking.get(id), blocking.get(id), blocking.get(randomBytes(16))]);
      assert.ok(a && b && a.key.equals(key) && b.key.equals(key) && miss === null);
      wipe(a!.key);
      wipe(b!.key);
      assert.ok(await net.forget(id));
      assert.is(await blocking.get(id), null, 'forgotten through net, missed through blocking');
    } finally {
      blocking.close();
      net.close();
    }
  }));

test('blocking: a reply that arrives one byte at a time is reassembled', () =>
  withAgent({}, async (t) => {
    const proxy = join(t.home, 'trickle.sock');
    const fake = await startFake('trickle', proxy, join(t.dir, 'agent.sock'));
    const c = await AgentClient.connect({ ...endpointOf(t.dir), path: proxy }, 2000, { transport: 'blocking' });
    try {
      const id = randomBytes(16);
      const key = randomBytes(64);
      await c.put(id, key, { ttl: 60 });
      const got = await c.get(id);
      assert.ok(got?.key.equals(key), 'the key came through intact');
      wipe(got!.key);
    } finally {
      c.close();
      fake.kill();
      await exited(fake);
    }
  }));

test('blocking: a silent agent is given up after the reply timeout, and the connection with it', async () => {
  const t = agentEnv();
  mkdirSync(t.dir, { recursive: true, mode: 0o700 });
  const fake = await startFake('silent', join(t.dir, 'agent.sock'));
  // The transport's waits, counted: each call of the addon's receive, the bound it was given and how it ended.
  const receives: string[] = [];
  const receive = native.socketReceive!;
  native.socketReceive = (fd, into, timeoutMs) => {
    try {
      const n = receive(fd, into, timeoutMs);
      receives.push(`${timeoutMs} ms: ${n} bytes`);
      return n;
    } catch (err) {
      receives.push(`${timeoutMs} ms: ${(err as { code?: string }).code ?? String(err)}`);
      throw err;
    }
  };
  try {
    const c = await AgentClient.connect(endpointOf(t.dir), 2000, { transport: 'blocking', replyTimeoutMs: 300 });
    const started = Date.now();
    const first = await failure(c.status());
    const took = Date.now() - started;
    assert.is(first.code, 'AGENT_UNAVAILABLE');
    assert.match(first.message, /did not answer within 300 ms/);
    // One wait, bounded by the reply timeout (300 ms, or 299 once a millisecond has passed), that timed out.
    assert.ok(receives.length === 1 && /^(300|299) ms: ETIMEDOUT$/.test(receives[0]!), receives.join('; '));
    // A lower bound: the wait was real. (Load can only lengthen it.)
    assert.ok(took >= 290, `gave up after the timeout (${took} ms)`);
    const again = await failure(c.status());
    assert.is(
      again.code,
      'AGENT_UNAVAILABLE',
      'later requests fail at once: a late reply would answer the wrong request',
    );
    assert.is(receives.length, 1, 'and without another wait');
    c.close();
  } finally {
    native.socketReceive = receive;
    fake.kill();
    await exited(fake);
    t.cleanup();
  }
});

for (const kind of kinds) {
  test(`${kind}: an agent that closes mid-request, and one of another protocol version, are reported`, async () => {
    const t = agentEnv();
    mkdirSync(t.dir, { recursive: true, mode: 0o700 });
    const closing = await startFake('close', join(t.dir, 'agent.sock'));
    try {
      const c = await AgentClient.connect(endpointOf(t.dir), 2000, { transport: kind });
      const r = await failure(c.status());
      assert.is(r.code, 'AGENT_UNAVAILABLE');
      assert.match(r.message, /closed the connection|connection failed/);
      c.close();
    } finally {
      closing.kill();
      await exited(closing);
    }
    rmSync(join(t.dir, 'agent.sock'), { force: true }); // a killed server leaves its socket file
    const other = await startFake('bad-magic', join(t.dir, 'agent.sock'));
    try {
      const c = await AgentClient.connect(endpointOf(t.dir), 2000, { transport: kind });
      const r = await failure(c.get(randomBytes(16)));
      assert.is(r.code, 'AGENT_VERSION');
      assert.match(r.message, /another protocol version/);
      c.close();
    } finally {
      other.kill();
      await exited(other);
      t.cleanup();
    }
  });

  test(`${kind}: no agent is ENOENT, a stale socket file ECONNREFUSED (what autostart looks for)`, async () => {
    const t = agentEnv();
    mkdirSync(t.dir, { recursive: true, mode: 0o700 });
    try {
      assert.is((await failure(AgentClient.connect(endpointOf(t.dir), 2000, { transport: kind }))).code, 'ENOENT');
      const stale = await startFake('stale', join(t.dir, 'agent.sock'));
      await exited(stale);
      assert.is(
        (await failure(AgentClient.connect(endpointOf(t.dir), 2000, { transport: kind }))).code,
        'ECONNREFUSED',
      );
    } finally {
      t.cleanup();
    }
  });

  test(`${kind}: after the agent closed an idle connection, the next request reconnects`, () =>
    withAgent({ STASH_AGENT_CONNECTION_IDLE_SECONDS: '1' }, async (t) => {
      const c = await AgentClient.connect(endpointOf(t.dir), 2000, { transport: kind });
      try {
        const id = randomBytes(16);
        await c.put(id, randomBytes(32), { ttl: 60 });
        const before = c.agentPid;
        // The agent closes the connection after 1 s without traffic.
        await waitFor(
          () => (c as unknown as { transport: { closedWhileIdle(): boolean } }).transport.closedWhileIdle(),
          5000,
          'the idle close',
        );
        const got = await c.get(id);
        assert.ok(got, 'the key is still there, through a new connection');
        wipe(got!.key);
        assert.is(c.agentPid, before, 'the same agent');
        assert.is(c.transportUsed, kind);
      } finally {
        c.close();
      }
    }));
}

test('the native calls refuse bad arguments with a coded error', () => {
  const codeOf = (fn: () => unknown): string => {
    try {
      fn();
    } catch (err) {
      return (err as { code?: string }).code ?? 'no code';
    }
    return 'no error';
  };
  assert.is(
    codeOf(() => native.unixConnect!(`/tmp/${'x'.repeat(200)}`)),
    'ENAMETOOLONG',
  );
  assert.is(
    codeOf(() => native.unixConnect!('')),
    'ENAMETOOLONG',
  );
  assert.is(
    codeOf(() => native.socketSend!(-1, Buffer.alloc(1))),
    'EBADF',
  );
  assert.is(
    codeOf(() => native.socketSend!(0, 'text' as unknown as Buffer)),
    'EINVAL',
  );
  assert.is(
    codeOf(() => native.socketReceive!(0, Buffer.alloc(0), 10)),
    'EINVAL',
  );
  const fd = openSync('/dev/null', 'r');
  closeSync(fd);
  assert.is(
    codeOf(() => native.socketPeerClosed!(fd) && native.socketSend!(fd, Buffer.alloc(1))),
    'EBADF',
    'a closed descriptor',
  );
  assert.is(native.isTerminal!(fd), false);
});

test('STASH_AGENT_TRANSPORT: auto by default, blocking or net, anything else a config error', () => {
  assert.is(transportChoice({}), 'auto');
  assert.is(transportChoice({ STASH_AGENT_TRANSPORT: '' }), 'auto');
  assert.is(transportChoice({ STASH_AGENT_TRANSPORT: 'net' }), 'net');
  assert.is(transportChoice({ STASH_AGENT_TRANSPORT: 'blocking' }), 'blocking');
  try {
    transportChoice({ STASH_AGENT_TRANSPORT: 'Blocking' });
    assert.unreachable('a wrong value must throw');
  } catch (err) {
    assert.is((err as { code?: string }).code, 'CONFIG');
    assert.match((err as Error).message, /STASH_AGENT_TRANSPORT must be auto, blocking or net; got "Blocking"/);
  }
});

test.run();
