import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { randomBytes } from 'node:crypto';
import {
  decodeRequest,
  decodeReply,
  encodeReply,
  encodeRequest,
  ephemeralKeys,
  FrameDecoder,
  MAX_PAYLOAD_BYTES,
  MsgType,
  ProtocolError,
  SCRATCH_BYTES,
  SecureChannel,
  SecureScratch,
  type Frame,
} from '../../src/protocol/index.js';
import { securePool } from '../../src/native/secure-pool.js';

function pair(): { client: SecureChannel; server: SecureChannel } {
  const c = ephemeralKeys();
  const s = ephemeralKeys();
  const server = SecureChannel.forServer(s, c.publicKey);
  const client = SecureChannel.forClient(c, s.publicKey);
  return { client, server };
}

function frameOf(wire: Buffer): Frame {
  const d = new FrameDecoder();
  d.push(Buffer.from(wire));
  return d.next()!;
}

function errCode(fn: () => unknown): string | undefined {
  try {
    fn();
  } catch (err) {
    assert.instance(err, ProtocolError);
    return (err as ProtocolError).code;
  }
  return undefined;
}

test('sealed put opens on the other side into secure memory', () => {
  const { client, server } = pair();
  const key = randomBytes(32);
  const wire = client.seal(encodeRequest({ type: 'put', id: randomBytes(16), key, path: null, ttl: 30 }));
  assert.is(wire.indexOf(key), -1, 'key bytes must not appear on the wire');
  const opened = server.open(frameOf(wire));
  const req = decodeRequest(opened.inner);
  assert.is(req.type, 'put');
  assert.ok((req as { key: Buffer }).key.equals(key));
  assert.ok((opened.inner.payload.buffer as ArrayBuffer).byteLength > 0);
  opened.release();
});

test('both directions work with independent counters, and each side reads what the other sealed', () => {
  const { client, server } = pair();
  for (let i = 0; i < 5; i++) {
    // Two requests for each reply: the counters of the two directions part, and each frame still opens to its own content.
    for (const offset of [2 * i, 2 * i + 1]) {
      const request = server.open(frameOf(client.seal(encodeRequest({ type: 'list', offset }))));
      assert.equal(decodeRequest(request.inner), { type: 'list', offset }, `request ${offset}`);
      request.release();
    }
    const reply = client.open(frameOf(server.seal(encodeReply({ type: 'ack', count: i }))));
    assert.equal(decodeReply(reply.inner), { type: 'ack', count: i }, `reply ${i}`);
    reply.release();
  }
});

test('tampered frames are rejected and do not desynchronise the channel', () => {
  const { client, server } = pair();
  const wire = client.seal(encodeRequest({ type: 'get', id: randomBytes(16) }));
  for (let i = 9; i < wire.length; i++) {
    const bad = Buffer.from(wire);
    bad[i]! ^= 0x01;
    const c = errCode(() => server.open(frameOf(bad)).release());
    assert.ok(c === 'AGENT_DECRYPT_FAILED' || c === 'AGENT_OUT_OF_ORDER', `byte ${i}: ${c}`);
  }
  server.open(frameOf(wire)).release();
});

test('replayed and reordered frames are rejected', () => {
  const { client, server } = pair();
  const a = client.seal(encodeRequest({ type: 'list', offset: 0 }));
  const b = client.seal(encodeRequest({ type: 'list', offset: 1 }));
  assert.is(
    errCode(() => server.open(frameOf(b))),
    'AGENT_OUT_OF_ORDER',
  );
  server.open(frameOf(a)).release();
  assert.is(
    errCode(() => server.open(frameOf(a))),
    'AGENT_OUT_OF_ORDER',
  );
  server.open(frameOf(b)).release();
});

test('a frame sealed for another session does not open', () => {
  const one = pair();
  const two = pair();
  const wire = one.client.seal(encodeRequest({ type: 'forget-all' }));
  assert.is(
    errCode(() => two.server.open(frameOf(wire))),
    'AGENT_DECRYPT_FAILED',
  );
});

test('an all-zero handshake key is refused; destroyed channels refuse work', () => {
  for (const [side, bad] of [
    ['server', Buffer.alloc(32)],
    ['client', Buffer.alloc(32)],
    ['server', Buffer.alloc(31, 1)],
  ] as const) {
    const before = securePool.stats().inUse;
    const ours = ephemeralKeys();
    const secret = Buffer.from(ours.secretKey.buffer); // the whole pool buffer behind it
    const open =
      side === 'server' ? () => SecureChannel.forServer(ours, bad) : () => SecureChannel.forClient(ours, bad);
    assert.is(errCode(open), 'AGENT_MALFORMED_PAYLOAD', `${side}, ${bad.length}-byte key`);
    assert.ok(
      secret.every((b) => b === 0),
      `${side}: our secret key is wiped even when the peer key is refused`,
    );
    assert.is(
      securePool.stats().inUse,
      before,
      `${side}: the secret key and both session keys went back to the secure pool`,
    );
  }
  const { client } = pair();
  client.destroy();
  assert.is(
    errCode(() => client.seal(encodeRequest({ type: 'forget-all' }))),
    'AGENT_NO_SESSION',
  );
});

test('the scratch buffers are all zero after every seal and open, lent while a frame is open, freed on destroy', () => {
  const { client, server } = pair();
  assert.equal(client.scratchState(), { seal: 'unused', open: 'unused' });
  const key = randomBytes(32);
  for (let i = 0; i < 50; i++) {
    const opened = server.open(
      frameOf(client.seal(encodeRequest({ type: 'put', id: randomBytes(16), key, path: '/p', ttl: 30 }))),
    );
    assert.is(server.scratchState().open, 'lent');
    assert.ok((decodeRequest(opened.inner) as { key: Buffer }).key.equals(key));
    opened.release();
    const reply = client.open(
      frameOf(server.sealEncoded((alloc) => encodeReply({ type: 'cache-key', key, ttl: 30 }, alloc))),
    );
    assert.ok((decodeReply(reply.inner) as { key: Buffer }).key.equals(key));
    reply.release();
    assert.equal(client.scratchState(), { seal: 'zero', open: 'zero' });
    assert.equal(server.scratchState(), { seal: 'zero', open: 'zero' });
  }
  // A second frame opened while the first is held gets its own memory; both stay readable.
  const a = server.open(frameOf(client.seal(encodeRequest({ type: 'list', offset: 1 }))));
  const b = server.open(frameOf(client.seal(encodeRequest({ type: 'list', offset: 2 }))));
  assert.equal(
    [decodeRequest(a.inner), decodeRequest(b.inner)],
    [
      { type: 'list', offset: 1 },
      { type: 'list', offset: 2 },
    ],
  );
  b.release();
  a.release();
  a.release();
  assert.is(server.scratchState().open, 'zero');
  const held = client.open(frameOf(server.seal(encodeRequest({ type: 'forget-all' }))));
  client.destroy();
  server.destroy();
  held.release(); // after destroy: nothing left to zero or free twice
  assert.equal(client.scratchState(), { seal: 'freed', open: 'freed' });
  assert.equal(server.scratchState(), { seal: 'freed', open: 'freed' });
});

test('a message near the 128 KiB cap seals and opens after many small ones, and small ones still reuse the scratch', () => {
  const { client, server } = pair();
  const id = randomBytes(16);
  for (let i = 0; i < 1000; i++) server.open(frameOf(client.seal(encodeRequest({ type: 'get', id })))).release();
  // The largest inner payload that fits: frame = 9 header + 8 counter + 1 type + payload + 16 tag.
  const big = randomBytes(MAX_PAYLOAD_BYTES - 8 - 1 - 16);
  assert.ok(big.length > 128 * 1024 - 64 && big.length > SCRATCH_BYTES);
  const opened = server.open(frameOf(client.seal({ type: MsgType.LIST_REPLY, payload: big })));
  assert.ok(opened.inner.payload.equals(big));
  opened.release();
  assert.is(
    errCode(() => client.seal({ type: MsgType.LIST_REPLY, payload: Buffer.alloc(big.length + 1) })),
    'AGENT_INVALID_SIZE',
  );
  assert.equal(client.scratchState(), { seal: 'zero', open: 'unused' });
  const after = server.open(frameOf(client.seal(encodeRequest({ type: 'get', id }))));
  assert.equal(decodeRequest(after.inner), { type: 'get', id });
  after.release();
  assert.equal(server.scratchState(), { seal: 'unused', open: 'zero' });
});

test('SecureScratch lends one view at a time, falls back beyond its size, zeroes whatever comes back', () => {
  const inUse = securePool.stats().inUse;
  const s = new SecureScratch(64);
  const a = s.take(40);
  a.fill(0xaa);
  const b = s.take(10); // lent: a fresh buffer
  const c = s.take(100); // too big: a fresh buffer
  assert.ok(a.buffer !== b.buffer && a.buffer !== c.buffer && b.length === 10 && c.length === 100);
  b.fill(1);
  c.fill(2);
  const empty = s.take(0); // lent too: a fresh one-byte allocation behind an empty view
  assert.is(securePool.stats().inUse, inUse + 4, 'the scratch and three fallbacks, all from the secure pool');
  const backings = [b, c, empty].map((v) => Buffer.from(v.buffer));
  s.give(b);
  s.give(c);
  s.give(empty);
  assert.ok(
    backings.every((m) => m.every((x) => x === 0)),
    'a fallback buffer is zeroed when given back',
  );
  assert.is(securePool.stats().inUse, inUse + 1, 'and goes back to the pool');
  s.give(c); // twice: the pool no longer knows the view, nothing happens
  assert.is(securePool.stats().inUse, inUse + 1);
  assert.is(s.state(), 'lent');
  s.give(a);
  assert.ok(a.every((x) => x === 0));
  assert.is(s.state(), 'zero');
  assert.is(s.take(64).buffer, a.buffer, 'the scratch is reused');
  s.destroy();
  assert.is(s.state(), 'freed');
  assert.is(securePool.stats().inUse, inUse, 'destroy() gave the scratch back to the pool');
  s.give(a); // late: the buffer may belong to someone else now, so nothing is touched
  const late = s.take(8);
  assert.ok(late.length === 8 && late.every((x) => x === 0));
  late.fill(5);
  s.give(late);
  assert.ok(late.every((x) => x === 0));
  assert.is(securePool.stats().inUse, inUse);
});

test.run();
