import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { randomBytes } from 'node:crypto';
import { FrameDecoder, encodeFrame, decodeHeader, HEADER_BYTES, MAX_FRAME_BYTES, MAX_PAYLOAD_BYTES, ProtocolError } from '../../src/protocol/index.js';

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
  assert.is(code(() => d.next()), 'AGENT_BAD_MAGIC');
  const e = new FrameDecoder();
  e.push(Buffer.from('GE'));
  assert.is(code(() => e.next()), 'AGENT_BAD_MAGIC');
  assert.is(code(() => e.push(Buffer.from('x'))), 'AGENT_BAD_MAGIC', 'a broken decoder refuses more input');
  assert.ok((() => { try { e.next(); } catch (err) { return (err as ProtocolError).fatal; } return false; })());
});

test('oversized frames are rejected as INVALID_SIZE', () => {
  const h = Buffer.alloc(9);
  Buffer.from('SBX2').copy(h);
  h.writeUInt32LE(MAX_PAYLOAD_BYTES + 1, 5);
  const d = new FrameDecoder();
  d.push(Buffer.from(h)); // the decoder zeroes what it consumes
  assert.is(code(() => d.next()), 'AGENT_INVALID_SIZE');
  h.writeUInt32LE(0xffffffff, 5);
  assert.is(code(() => decodeHeader(h)), 'AGENT_INVALID_SIZE');
  assert.is(code(() => encodeFrame(1, Buffer.alloc(MAX_PAYLOAD_BYTES + 1))), 'AGENT_INVALID_SIZE');
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

test.run();
