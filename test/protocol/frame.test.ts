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
 * Bytes the decoder copies, concatenates, sets or fills while it decodes a
 * frame of `size` bytes pushed a byte at a time. A count, not a clock: CPU
 * time of a few milliseconds swung from 8x to 28x for 8x the bytes with other
 * suites running at once (CI, 2026-11-27), while the count is exact. The bulk
 * moves of JavaScript code are counted (copy, fill, set, slice, concat, a
 * Buffer.from of a view), so the old decoder (concatenating and zeroing
 * everything pending on every chunk) counts quadratically here; a quadratic
 * loop that moves nothing is left to the benchmarks.
 */
function bytesTouched(size: number): number {
  const wire = encodeFrame(0x10, randomBytes(size - HEADER_BYTES));
  const bytes = Array.from({ length: wire.length }, (_, i) => Buffer.from(wire.subarray(i, i + 1))); // copies: input is zeroed
  const d = new FrameDecoder();
  let touched = 0;
  const proto = Buffer.prototype as unknown as Record<string, (...args: never[]) => unknown>;
  const u8 = Uint8Array.prototype as unknown as Record<string, (...args: never[]) => unknown>;
  const originals = {
    copy: proto.copy!,
    fill: proto.fill!,
    set: u8.set!,
    u8fill: u8.fill!,
    concat: Buffer.concat,
    from: Buffer.from,
    slice: u8.slice!,
  };
  const span = (length: number, start?: number, end?: number): number =>
    Math.max(0, Math.min(end ?? length, length) - Math.max(start ?? 0, 0));
  proto.copy = function (this: Buffer, target: Buffer, targetStart?: number, sourceStart?: number, sourceEnd?: number) {
    touched += Math.min(span(this.length, sourceStart, sourceEnd), target.length - (targetStart ?? 0));
    return originals.copy.call(this, target as never, targetStart as never, sourceStart as never, sourceEnd as never);
  } as never;
  proto.fill = function (this: Buffer, value: unknown, start?: unknown, end?: unknown) {
    touched +=
      typeof start === 'number' ? span(this.length, start, typeof end === 'number' ? end : undefined) : this.length;
    return originals.fill.call(this, value as never, start as never, end as never);
  } as never;
  u8.fill = function (this: Uint8Array, value: unknown, start?: number, end?: number) {
    touched += span(this.length, start, end);
    return originals.u8fill.call(this, value as never, start as never, end as never);
  } as never;
  u8.set = function (this: Uint8Array, source: ArrayLike<number>, offset?: number) {
    touched += source.length;
    return originals.set.call(this, source as never, offset as never);
  } as never;
  Buffer.concat = ((list: readonly Uint8Array[], totalLength?: number) => {
    touched += totalLength ?? list.reduce((n, b) => n + b.length, 0);
    return originals.concat(list, totalLength);
  }) as typeof Buffer.concat;
  // A copy of a view (an ArrayBuffer with offsets is shared, not copied).
  Buffer.from = ((...args: unknown[]) => {
    if (ArrayBuffer.isView(args[0])) touched += args[0].byteLength;
    return (originals.from as (...a: unknown[]) => Buffer)(...args);
  }) as typeof Buffer.from;
  u8.slice = function (this: Uint8Array, start?: number, end?: number) {
    touched += span(this.length, start, end);
    return originals.slice.call(this, start as never, end as never);
  } as never;
  let frame = null;
  try {
    for (const b of bytes) {
      d.push(b);
      frame = d.next() ?? frame;
    }
  } finally {
    proto.copy = originals.copy;
    proto.fill = originals.fill;
    u8.set = originals.set;
    u8.fill = originals.u8fill;
    Buffer.concat = originals.concat;
    Buffer.from = originals.from;
    u8.slice = originals.slice;
  }
  assert.is(frame!.payload.length, size - HEADER_BYTES);
  return touched;
}

test('reassembly is linear: a frame pushed a byte at a time has each byte moved a bounded number of times', () => {
  const small = bytesTouched(MAX_FRAME_BYTES / 8);
  const large = bytesTouched(MAX_FRAME_BYTES);
  console.log(
    `byte-at-a-time decoding: ${MAX_FRAME_BYTES / 8} bytes moved ${small}, ${MAX_FRAME_BYTES} bytes moved ${large}`,
  );
  // Each byte is copied once and its one-byte input zeroed once; headers are
  // cleared once. Anything beyond a few moves per byte is a copy per chunk.
  assert.ok(small <= 4 * (MAX_FRAME_BYTES / 8), `${small} bytes moved for a ${MAX_FRAME_BYTES / 8}-byte frame`);
  assert.ok(large <= 4 * MAX_FRAME_BYTES, `${large} bytes moved for a ${MAX_FRAME_BYTES}-byte frame`);
  assert.ok(
    large >= MAX_FRAME_BYTES - HEADER_BYTES,
    `only ${large} bytes moved: the count missed the decoder's copies`,
  );
});

test.run();
