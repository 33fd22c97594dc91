/**
 * SBX2 framing: magic "SBX2" (4 bytes), message type (1 byte), payload length
 * (u32 little-endian), payload. A whole frame is at most 128 KiB.
 * Pure: no I/O. FrameDecoder turns a byte stream into frames.
 */
import { ProtocolError } from './errors.js';

export const MAGIC = Buffer.from('SBX2', 'ascii');
export const HEADER_BYTES = 9;
export const MAX_FRAME_BYTES = 128 * 1024;
export const MAX_PAYLOAD_BYTES = MAX_FRAME_BYTES - HEADER_BYTES;

export interface Frame {
  type: number;
  payload: Buffer;
}

/** The 9-byte header of a frame with this type and payload length. */
export function encodeHeader(type: number, payloadLength: number): Buffer {
  if (!Number.isInteger(type) || type < 0 || type > 255)
    throw new ProtocolError('MALFORMED_FRAME', `message type ${type} is not a byte`);
  if (payloadLength > MAX_PAYLOAD_BYTES) {
    throw new ProtocolError(
      'INVALID_SIZE',
      `payload of ${payloadLength} bytes exceeds the ${MAX_PAYLOAD_BYTES}-byte limit`,
    );
  }
  const header = Buffer.allocUnsafe(HEADER_BYTES);
  MAGIC.copy(header, 0);
  header.writeUInt8(type, 4);
  header.writeUInt32LE(payloadLength, 5);
  return header;
}

/** One whole frame as a single buffer. */
export function encodeFrame(type: number, payload: Buffer = Buffer.alloc(0)): Buffer {
  return Buffer.concat([encodeHeader(type, payload.length), payload]);
}

/** Checks a 9-byte header; returns the type and payload length. */
export function decodeHeader(header: Buffer): { type: number; length: number } {
  if (header.length < HEADER_BYTES)
    throw new ProtocolError('MALFORMED_FRAME', 'frame header is shorter than 9 bytes', true);
  if (!header.subarray(0, 4).equals(MAGIC)) {
    const seen = header.subarray(0, 4);
    const printable = /^[\x20-\x7e]{4}$/.test(seen.toString('latin1'))
      ? `"${seen.toString('latin1')}"`
      : seen.toString('hex');
    throw new ProtocolError('BAD_MAGIC', `bad frame magic ${printable}, expected "SBX2"`, true);
  }
  const type = header.readUInt8(4);
  const length = header.readUInt32LE(5);
  if (length > MAX_PAYLOAD_BYTES) {
    throw new ProtocolError(
      'INVALID_SIZE',
      `frame of ${length + HEADER_BYTES} bytes exceeds the ${MAX_FRAME_BYTES}-byte limit`,
      true,
    );
  }
  return { type, length };
}

/**
 * Incremental decoder: push() bytes as they arrive, take frames with next().
 * A framing error is fatal (thrown); after it the decoder refuses more input.
 *
 * Each input byte is copied once: header bytes into a 9-byte buffer, payload
 * bytes into a buffer of the announced size, allocated when the header is
 * complete. (It used to concatenate everything pending on every chunk, so a
 * 128 KiB frame sent a byte at a time cost seconds of CPU.) Payloads are the
 * decoder's own copies, so the caller may zero them; every input buffer is
 * zeroed once it has been consumed, and clear() zeroes everything held.
 */
export class FrameDecoder {
  /** Input not consumed yet: chunks[head] from offset `offset`, then the rest. */
  private chunks: Buffer[] = [];
  private head = 0;
  private offset = 0;
  private queued = 0;
  private readonly header = Buffer.alloc(HEADER_BYTES);
  private headerFill = 0;
  private type = 0;
  private body: Buffer | null = null;
  private bodyFill = 0;
  private broken: ProtocolError | null = null;

  push(data: Buffer): void {
    if (this.broken) throw this.broken;
    if (data.length === 0) return;
    this.chunks.push(data);
    this.queued += data.length;
  }

  /** Bytes held but not yet returned as frames. */
  get pending(): number {
    return this.queued + this.headerFill + this.bodyFill;
  }

  /** The next complete frame, or null when more bytes are needed. */
  next(): Frame | null {
    if (this.broken) throw this.broken;
    if (this.headerFill < HEADER_BYTES) {
      this.headerFill += this.take(this.header, this.headerFill, HEADER_BYTES - this.headerFill);
      if (this.headerFill < HEADER_BYTES) {
        // A wrong magic is visible before the whole header arrives: fail early.
        if (this.headerFill > 0) this.checkMagicPrefix();
        return null;
      }
      let decoded: { type: number; length: number };
      try {
        decoded = decodeHeader(this.header);
      } catch (err) {
        this.fail(err as ProtocolError);
      }
      this.type = decoded.type;
      this.body = Buffer.alloc(decoded.length);
      this.bodyFill = 0;
    }
    const body = this.body!;
    this.bodyFill += this.take(body, this.bodyFill, body.length - this.bodyFill);
    if (this.bodyFill < body.length) return null;
    const frame = { type: this.type, payload: body };
    this.header.fill(0);
    this.headerFill = 0;
    this.body = null;
    this.bodyFill = 0;
    return frame;
  }

  /** Zeroes and drops everything buffered. */
  clear(): void {
    for (let i = this.head; i < this.chunks.length; i++) this.chunks[i]!.fill(0);
    this.chunks = [];
    this.head = 0;
    this.offset = 0;
    this.queued = 0;
    this.header.fill(0);
    this.headerFill = 0;
    this.body?.fill(0);
    this.body = null;
    this.bodyFill = 0;
  }

  /** Moves up to `want` queued bytes into `dst` at `at`; zeroes each input chunk once used up. */
  private take(dst: Buffer, at: number, want: number): number {
    let moved = 0;
    while (moved < want && this.head < this.chunks.length) {
      const chunk = this.chunks[this.head]!;
      const n = Math.min(want - moved, chunk.length - this.offset);
      chunk.copy(dst, at + moved, this.offset, this.offset + n);
      moved += n;
      this.offset += n;
      if (this.offset === chunk.length) {
        chunk.fill(0);
        this.chunks[this.head++] = EMPTY;
        this.offset = 0;
      }
    }
    this.queued -= moved;
    if (this.head === this.chunks.length) {
      this.chunks = [];
      this.head = 0;
    } else if (this.head > 1024 && this.head * 2 > this.chunks.length) {
      this.chunks = this.chunks.slice(this.head);
      this.head = 0;
    }
    return moved;
  }

  private checkMagicPrefix(): void {
    const n = Math.min(this.headerFill, MAGIC.length);
    if (this.header.subarray(0, n).equals(MAGIC.subarray(0, n))) return;
    const padded = Buffer.alloc(HEADER_BYTES);
    this.header.copy(padded, 0, 0, n);
    try {
      decodeHeader(padded);
    } catch (err) {
      this.fail(err as ProtocolError);
    }
  }

  private fail(err: ProtocolError): never {
    this.broken = err;
    this.clear();
    throw err;
  }
}

const EMPTY = Buffer.alloc(0);
