import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { randomBytes } from 'node:crypto';
import {
  FrameDecoder,
  encodeFrame,
  decodeHeader,
  HEADER_BYTES,
  MAX_FRAME_BYTES,
  MAX_PAYLOAD_BYTES,
  ProtocolError,
} from '../../src/protocol/index.js';

function code(fn: () => unknown): string | undefined {
  try {
    fn();
  } catch (err) {
    assert.instance(err, ProtocolError);
    return (err as ProtocolError).code;
  }
  return undefined;
}

test('header is SBX2 + type + u32le length', () => {
  const f = encodeFrame(0x21, Buffer.from([1, 2, 3]));
  assert.is(f.length, HEADER_BYTES + 3);
  assert.equal([...f.subarray(0, 9)], [0x53, 0x42, 0x58, 0x32, 0x21, 3, 0, 0, 0]);
  assert.equal(decodeHeader(f), { type: 0x21, length: 3 });
});

test('decoder reassembles frames split at every byte boundary', () => {
  const frames = [encodeFrame(1, randomBytes(40)), encodeFrame(2), encodeFrame(3, randomBytes(1000))];
  const wire = Buffer.concat(frames);
  for (const step of [1, 2, 7, 9, 100, wire.length]) {
    const d = new FrameDecoder();
    const got: number[] = [];
    for (let i = 0; i < wire.length; i += step) {
      d.push(Buffer.from(wire.subarray(i, i + step)));
      for (let f = d.next(); f; f = d.next()) got.push(f.type);
    }
    assert.equal(got, [1, 2, 3], `step ${step}`);
    assert.is(d.pending, 0);
  }
});

test('bad magic is fatal, even before a whole header arrives', () => {
  const d = new FrameDecoder();
  d.push(Buffer.from('SBX1'));
  assert.is(
    code(() => d.next()),
    'AGENT_BAD_MAGIC',
  );
  const e = new FrameDecoder();
  e.push(Buffer.from('GE'));
  assert.is(
    code(() => e.next()),
    'AGENT_BAD_MAGIC',
  );
  assert.is(
    code(() => e.push(Buffer.from('x'))),
    'AGENT_BAD_MAGIC',
    'a broken decoder refuses more input',
  );
  assert.ok(
    (() => {
      try {
        e.next();
      } catch (err) {
        return (err as ProtocolError).fatal;
      }
      return false;
    })(),
  );
});

test('oversized frames are rejected as INVALID_SIZE', () => {
  const h = Buffer.alloc(9);
  Buffer.from('SBX2').copy(h);
  h.writeUInt32LE(MAX_PAYLOAD_BYTES + 1, 5);
  const d = new FrameDecoder();
  d.push(Buffer.from(h)); // the decoder zeroes what it consumes
  assert.is(
    code(() => d.next()),
    'AGENT_INVALID_SIZE',
  );
  h.writeUInt32LE(0xffffffff, 5);
  assert.is(
    code(() => decodeHeader(h)),
    'AGENT_INVALID_SIZE',
  );
  assert.is(
    code(() => encodeFrame(1, Buffer.alloc(MAX_PAYLOAD_BYTES + 1))),
    'AGENT_INVALID_SIZE',
  );
  // exactly the limit is fine
  const max = encodeFrame(1, Buffer.alloc(MAX_PAYLOAD_BYTES));
  assert.is(max.length, MAX_FRAME_BYTES);
  const ok = new FrameDecoder();
  ok.push(max);
  assert.is(ok.next()!.payload.length, MAX_PAYLOAD_BYTES);
});

test('consumed input is zeroed', () => {
  const chunk = encodeFrame(5, Buffer.from('secret-ish'));
  const d = new FrameDecoder();
  d.push(chunk);
  const f = d.next()!;
  assert.is(f.payload.toString(), 'secret-ish');
  assert.ok(chunk.every((b) => b === 0));
});

test('input is zeroed once consumed, also when a chunk spans two frames, and clear() zeroes a partial frame', () => {
  const a = encodeFrame(5, Buffer.from('first-secret'));
  const b = encodeFrame(6, Buffer.from('second-secret'));
  const wire = Buffer.concat([a, b]);
  const chunks = [
    Buffer.from(wire.subarray(0, 4)),
    Buffer.from(wire.subarray(4, a.length + 5)),
    Buffer.from(wire.subarray(a.length + 5)),
  ];
  const d = new FrameDecoder();
  d.push(chunks[0]!);
  assert.is(d.next(), null);
  assert.ok(
    chunks[0]!.every((x) => x === 0),
    'a chunk taken whole into the header is zeroed',
  );
  d.push(chunks[1]!);
  assert.is(d.next()!.payload.toString(), 'first-secret');
  assert.is(d.next(), null);
  assert.ok(
    chunks[1]!.every((x) => x === 0),
    'the chunk that ends one frame and starts the next is zeroed once used up',
  );
  d.push(chunks[2]!);
  assert.is(d.next()!.payload.toString(), 'second-secret');
  assert.ok(chunks[2]!.every((x) => x === 0));
  assert.is(d.pending, 0);

  const partial = Buffer.from(encodeFrame(7, Buffer.from('never-finished')));
  const held = Buffer.from(partial.subarray(0, 15));
  const e = new FrameDecoder();
  e.push(held);
  e.push(Buffer.from('x')); // queued, not yet looked at
  assert.is(e.next(), null);
  assert.is(e.pending, 16);
  e.clear();
  assert.is(e.pending, 0);
  assert.ok(held.every((x) => x === 0));
});

/**
 * Fastest of five runs, in ms of this process's CPU time, of decoding a frame
 * of `size` bytes pushed a byte at a time. CPU time, not wall time: with other
 * suites running at once, a run of tens of milliseconds is preempted now and
 * then, and the wall clock counted the other processes' turns too (a 39x
 * "ratio" under load, 2026-11-26).
 */
function byteAtATimeMs(size: number): number {
  const wire = encodeFrame(0x10, randomBytes(size - HEADER_BYTES));
  let best = Infinity;
  for (let run = 0; run < 5; run++) {
    const bytes = Array.from({ length: wire.length }, (_, i) => Buffer.from(wire.subarray(i, i + 1))); // copies: input is zeroed
    const d = new FrameDecoder();
    const started = process.cpuUsage();
    let frame = null;
    for (const b of bytes) {
      d.push(b);
      frame = d.next() ?? frame;
    }
    const used = process.cpuUsage(started);
    best = Math.min(best, (used.user + used.system) / 1e3);
    assert.is(frame!.payload.length, size - HEADER_BYTES);
  }
  return best;
}

test('reassembly is linear: a frame 8x larger pushed a byte at a time takes about 8x as long, not 64x', () => {
  byteAtATimeMs(4096); // warm-up
  const small = byteAtATimeMs(MAX_FRAME_BYTES / 8);
  const large = byteAtATimeMs(MAX_FRAME_BYTES);
  console.log(
    `byte-at-a-time decoding: ${MAX_FRAME_BYTES / 8} bytes ${small.toFixed(1)} ms, ${MAX_FRAME_BYTES} bytes ${large.toFixed(1)} ms`,
  );
  assert.ok(large < 24 * Math.max(small, 1), `8x the bytes took ${(large / small).toFixed(1)}x as long`);
});

test.run();
