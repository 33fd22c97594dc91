/**
 * Secure frames against a live agent: tampered, replayed and reordered frames
 * are rejected, and a known key's bytes never appear in the socket traffic,
 * the agent's log, or an error message.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { randomBytes } from 'node:crypto';
import { connect, createServer, type Socket } from 'node:net';
import { join } from 'node:path';
import { AgentClient } from '../../src/agent/client.js';
import {
  decodeReply,
  encodeFrame,
  encodeRequest,
  ephemeralKeys,
  FrameDecoder,
  MAX_PAYLOAD_BYTES,
  MsgType,
  ProtocolErrorCode,
  SecureChannel,
  type Frame,
} from '../../src/protocol/index.js';
import { agentEnv, exited, readLog, startAgent, type TestAgentEnv } from '../helpers/agent.js';

function openSocket(path: string): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const s = connect(path);
    s.once('connect', () => resolve(s));
    s.once('error', reject);
  });
}

/** A raw connection that reads reply frames one at a time. */
async function rawConnection(path: string) {
  const s = await openSocket(path);
  const decoder = new FrameDecoder();
  const frames: Frame[] = [];
  const waiters: Array<(f: Frame) => void> = [];
  s.on('data', (d: Buffer) => {
    decoder.push(d);
    for (let f = decoder.next(); f; f = decoder.next()) {
      const w = waiters.shift();
      if (w) w(f);
      else frames.push(f);
    }
  });
  const next = (): Promise<Frame> => {
    const f = frames.shift();
    return f ? Promise.resolve(f) : new Promise((r) => waiters.push(r));
  };
  return { s, next };
}

/** HELLO over a raw connection; returns our side of the sealed channel. */
async function handshake(s: Socket, next: () => Promise<Frame>): Promise<SecureChannel> {
  const ours = ephemeralKeys();
  const hello = encodeRequest({ type: 'hello', version: 2, publicKey: ours.publicKey });
  s.write(encodeFrame(hello.type, hello.payload));
  const ok = decodeReply(await next());
  assert.is(ok.type, 'hello-ok');
  return SecureChannel.forClient(ours, (ok as { publicKey: Buffer }).publicKey);
}

/** A live agent, a raw connection to it and a sealed channel over that connection, for the length of `fn`. */
async function withSealedConnection(
  fn: (c: { t: TestAgentEnv; s: Socket; next: () => Promise<Frame>; channel: SecureChannel }) => Promise<void>,
): Promise<void> {
  const t = agentEnv();
  const proc = await startAgent(t);
  const { s, next } = await rawConnection(join(t.dir, 'agent.sock'));
  try {
    await fn({ t, s, next, channel: await handshake(s, next) });
  } finally {
    s.destroy();
    proc.kill('SIGTERM');
    await exited(proc);
    t.cleanup();
  }
}

test('tampered, replayed and reordered sealed frames are rejected by the live agent', () =>
  withSealedConnection(async ({ s, next, channel }) => {
    const id = randomBytes(16);
    const put = channel.seal(encodeRequest({ type: 'put', id, key: randomBytes(32), path: null, ttl: 60 }));
    s.write(put);
    const ack = channel.open(await next());
    assert.is(decodeReply(ack.inner).type, 'ack');
    ack.release();

    // replay of the put
    s.write(put);
    let reply = decodeReply(await next());
    assert.equal(reply.type === 'error' && reply.code, ProtocolErrorCode.OUT_OF_ORDER);

    // tampered: flip one ciphertext bit
    const get1 = channel.seal(encodeRequest({ type: 'get', id }));
    const bad = Buffer.from(get1);
    bad[bad.length - 20]! ^= 0x40;
    s.write(bad);
    reply = decodeReply(await next());
    assert.equal(reply.type === 'error' && reply.code, ProtocolErrorCode.DECRYPT_FAILED);

    // reordered: the next-but-one frame first
    const get2 = channel.seal(encodeRequest({ type: 'list', offset: 0 }));
    s.write(get2);
    reply = decodeReply(await next());
    assert.equal(reply.type === 'error' && reply.code, ProtocolErrorCode.OUT_OF_ORDER);

    // the channel is intact: the genuine frames in order still work
    s.write(get1);
    const hit = channel.open(await next());
    assert.is(decodeReply(hit.inner).type, 'cache-key');
    hit.release();
    s.write(get2);
    const list = channel.open(await next());
    assert.is(decodeReply(list.inner).type, 'list');
    list.release();
    channel.destroy();
  }));

test('the live agent refuses a sealed put with a zero or negative TTL, stores nothing and keeps serving', () =>
  withSealedConnection(async ({ s, next, channel }) => {
    // The client's encoder refuses such a TTL before sending: patch the i32 TTL (the payload's last 4 bytes) by hand.
    const ask = async (frame: Buffer) => {
      s.write(frame);
      const f = await next();
      if (f.type !== MsgType.SEALED) return decodeReply(f);
      const opened = channel.open(f);
      try {
        return decodeReply(opened.inner);
      } finally {
        opened.release();
      }
    };
    const id = randomBytes(16);
    for (const ttl of [0, -5]) {
      const put = encodeRequest({ type: 'put', id, key: randomBytes(32), path: null, ttl: 60 });
      put.payload.writeInt32LE(ttl, put.payload.length - 4);
      const reply = await ask(channel.seal(put));
      assert.equal(
        reply.type === 'error' && reply.code,
        ProtocolErrorCode.NON_POSITIVE_TTL,
        `TTL ${ttl}: ${JSON.stringify(reply)}`,
      );
      assert.match(reply.type === 'error' ? reply.message : '', /TTL must be a positive/);
    }
    assert.is((await ask(channel.seal(encodeRequest({ type: 'get', id })))).type, 'cache-miss', 'nothing was stored');
    assert.is(
      (await ask(channel.seal(encodeRequest({ type: 'put', id, key: randomBytes(32), path: null, ttl: 60 })))).type,
      'ack',
    );
    assert.is(
      (await ask(channel.seal(encodeRequest({ type: 'get', id })))).type,
      'cache-key',
      'the connection still serves',
    );
    channel.destroy();
  }));

test('a refused HELLO (all-zero key, unknown flags) leaves the session in use intact', () =>
  withSealedConnection(async ({ s, next, channel }) => {
    const id = randomBytes(16);
    s.write(channel.seal(encodeRequest({ type: 'put', id, key: randomBytes(32), path: null, ttl: 60 })));
    const ack = channel.open(await next());
    assert.is(decodeReply(ack.inner).type, 'ack');
    ack.release();
    const hello = encodeRequest({ type: 'hello', version: 2, publicKey: Buffer.alloc(32, 1) });
    hello.payload.fill(0, hello.payload.length - 32); // the public key is the payload's last 32 bytes
    s.write(encodeFrame(hello.type, hello.payload));
    const refused = decodeReply(await next());
    assert.equal(
      refused.type === 'error' && refused.code,
      ProtocolErrorCode.MALFORMED_PAYLOAD,
      JSON.stringify(refused),
    );
    // A HELLO with a flag this agent does not know (a newer client probing) is refused the same way.
    const probe = encodeRequest({ type: 'hello', version: 2, publicKey: randomBytes(32) });
    probe.payload[1] = 0x01;
    s.write(encodeFrame(probe.type, probe.payload));
    const unknown = decodeReply(await next());
    assert.equal(unknown.type === 'error' && unknown.code, ProtocolErrorCode.UNKNOWN_FLAGS, JSON.stringify(unknown));
    s.write(channel.seal(encodeRequest({ type: 'get', id })));
    const hit = await next();
    assert.is(hit.type, MsgType.SEALED, 'the old session still answers sealed');
    const opened = channel.open(hit);
    assert.is(decodeReply(opened.inner).type, 'cache-key');
    opened.release();
    channel.destroy();
  }));

test('key bytes never appear in socket traffic, the log, or error messages', async () => {
  const t = agentEnv();
  const proc = await startAgent(t);
  // a recording proxy between the client and the agent
  const captured: Buffer[] = [];
  const proxyPath = join(t.home, 'proxy.sock');
  const proxy = createServer((client) => {
    const upstream = connect(join(t.dir, 'agent.sock'));
    client.on('data', (d) => {
      captured.push(Buffer.from(d));
      upstream.write(d);
    });
    upstream.on('data', (d) => {
      captured.push(Buffer.from(d));
      client.write(d);
    });
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
  });
  await new Promise<void>((r) => proxy.listen(proxyPath, r));
  const messages: string[] = [];
  try {
    const c = await AgentClient.connect({ dir: null, path: proxyPath, source: 'STASH_SESSION_AGENT_DIR' });
    const key = Buffer.from('6b6e6f776e2d6b65792d6279746573210123456789abcdef0011223344556677', 'hex');
    const id = randomBytes(16);
    await c.put(id, key, { path: '/known', ttl: 30 });
    const hit = await c.get(id);
    assert.ok(hit?.key.equals(key), 'the key did travel');
    await c.list();
    for (const attempt of [
      () => c.put(id, key, { ttl: 0 }),
      () => c.put(randomBytes(70), key, {}),
      () => c.registerActivity(1, 'evil'),
      () => c.unregisterActivity(process.pid, randomBytes(16).toString('hex')),
    ]) {
      try {
        await attempt();
      } catch (err) {
        messages.push(String((err as Error).message), String((err as Error).stack));
      }
    }
    assert.ok(messages.length >= 8, 'every bad request produced an error');
    await c.forgetAll();
    c.close();
    await new Promise((r) => setTimeout(r, 100));
    const traffic = Buffer.concat(captured);
    assert.ok(traffic.length > 200, 'traffic was captured');
    const log = readLog(t);
    const needles = [key, key.subarray(0, 8), key.subarray(24)];
    const texts = [key.toString('hex'), key.toString('base64'), key.subarray(0, 8).toString('hex')];
    for (const n of needles) assert.is(traffic.indexOf(n), -1, 'key bytes in socket traffic');
    for (const hay of [log, ...messages]) {
      for (const n of texts) assert.not.ok(hay.includes(n), `key text found in ${hay.slice(0, 80)}`);
      assert.is(Buffer.from(hay, 'latin1').indexOf(key.subarray(0, 8)), -1);
    }
    // control: the plain part of the traffic (HELLO) is visible, so the search itself works
    assert.ok(traffic.indexOf(Buffer.from('SBX2')) >= 0);
  } finally {
    proxy.close();
    proc.kill('SIGTERM');
    await exited(proc);
    t.cleanup();
  }
});

test('the live agent answers a near-128 KiB sealed frame after many small ones, and keeps serving; client scratch is zero between requests', () =>
  withSealedConnection(async ({ t, s, next, channel }) => {
    const id = randomBytes(16);
    const key = randomBytes(32);
    /** One sealed round trip; a key in the reply is compared before the plaintext is zeroed. */
    const ask = async (wire: Buffer) => {
      s.write(wire);
      const opened = channel.open(await next());
      try {
        const r = decodeReply(opened.inner);
        return r.type === 'cache-key' ? { type: r.type, keyMatches: r.key.equals(key) } : r;
      } finally {
        opened.release();
      }
    };
    assert.is((await ask(channel.seal(encodeRequest({ type: 'put', id, key, path: null, ttl: 60 })))).type, 'ack');
    for (let i = 0; i < 300; i++) {
      const r = await ask(channel.seal(encodeRequest({ type: 'get', id })));
      assert.equal(r, { type: 'cache-key', keyMatches: true });
    }
    // The largest sealed frame the agent accepts: a GET whose id is far too long (answered, sealed, not fatal).
    const big = channel.seal({ type: MsgType.GET, payload: randomBytes(MAX_PAYLOAD_BYTES - 8 - 1 - 16) });
    assert.is(big.length, 128 * 1024);
    const refused = await ask(big);
    assert.equal(refused.type === 'error' && refused.code, ProtocolErrorCode.MALFORMED_PAYLOAD);
    const again = await ask(channel.seal(encodeRequest({ type: 'get', id })));
    assert.equal(again, { type: 'cache-key', keyMatches: true }, 'the connection still serves after the large frame');
    channel.destroy();

    const c = await AgentClient.connect({
      dir: null,
      path: join(t.dir, 'agent.sock'),
      source: 'STASH_SESSION_AGENT_DIR',
    });
    assert.is(c.scratchState(), null, 'no channel before the first cache request');
    for (let i = 0; i < 100; i++) {
      const hit = await c.get(id);
      assert.ok(hit?.key.equals(key));
      assert.equal(c.scratchState(), { seal: 'zero', open: 'zero' });
    }
    c.close();
  }));

test.run();
