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
  if (!Number.isInteger(type) || type < 0 || type > 255) throw new ProtocolError('MALFORMED_FRAME', `message type ${type} is not a byte`);
  if (payloadLength > MAX_PAYLOAD_BYTES) {
    throw new ProtocolError('INVALID_SIZE', `payload of ${payloadLength} bytes exceeds the ${MAX_PAYLOAD_BYTES}-byte limit`);
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
  if (header.length < HEADER_BYTES) throw new ProtocolError('MALFORMED_FRAME', 'frame header is shorter than 9 bytes', true);
  if (!header.subarray(0, 4).equals(MAGIC)) {
    const seen = header.subarray(0, 4);
    const printable = /^[\x20-\x7e]{4}$/.test(seen.toString('latin1')) ? `"${seen.toString('latin1')}"` : seen.toString('hex');
    throw new ProtocolError('BAD_MAGIC', `bad frame magic ${printable}, expected "SBX2"`, true);
  }
  const type = header.readUInt8(4);
  const length = header.readUInt32LE(5);
  if (length > MAX_PAYLOAD_BYTES) {
    throw new ProtocolError('INVALID_SIZE', `frame of ${length + HEADER_BYTES} bytes exceeds the ${MAX_FRAME_BYTES}-byte limit`, true);
  }
  return { type, length };
}

/**
 * Incremental decoder: push() bytes as they arrive, take frames with next().
 * A framing error is fatal (thrown); after it the decoder refuses more input.
 * Payloads are copied out, so the caller may zero them without touching the
 * decoder's buffers, and consumed input is zeroed.
 */
export class FrameDecoder {
  private chunks: Buffer[] = [];
  private buffered = 0;
  private broken: ProtocolError | null = null;

  push(data: Buffer): void {
    if (this.broken) throw this.broken;
    if (data.length === 0) return;
    this.chunks.push(data);
    this.buffered += data.length;
  }

  /** Bytes held but not yet returned as frames. */
  get pending(): number {
    return this.buffered;
  }

  /** The next complete frame, or null when more bytes are needed. */
  next(): Frame | null {
    if (this.broken) throw this.broken;
    if (this.buffered < HEADER_BYTES) {
      // A wrong magic is visible before the whole header arrives: fail early.
      if (this.buffered > 0) this.checkMagicPrefix();
      return null;
    }
    const all = this.flatten();
    let header: { type: number; length: number };
    try {
      header = decodeHeader(all.subarray(0, HEADER_BYTES));
    } catch (err) {
      this.broken = err as ProtocolError;
      this.clear();
      throw err;
    }
    const total = HEADER_BYTES + header.length;
    if (all.length < total) return null;
    const payload = Buffer.from(all.subarray(HEADER_BYTES, total));
    const rest = all.length > total ? Buffer.from(all.subarray(total)) : null;
    all.fill(0);
    this.chunks = rest ? [rest] : [];
    this.buffered = rest ? rest.length : 0;
    return { type: header.type, payload };
  }

  /** Zeroes and drops everything buffered. */
  clear(): void {
    for (const c of this.chunks) c.fill(0);
    this.chunks = [];
    this.buffered = 0;
  }

  private flatten(): Buffer {
    if (this.chunks.length === 1) return this.chunks[0]!;
    const all = Buffer.concat(this.chunks, this.buffered);
    for (const c of this.chunks) c.fill(0);
    this.chunks = [all];
    return all;
  }

  private checkMagicPrefix(): void {
    const all = this.flatten();
    const n = Math.min(all.length, MAGIC.length);
    if (!all.subarray(0, n).equals(MAGIC.subarray(0, n))) {
      const padded = Buffer.concat([all.subarray(0, n), Buffer.alloc(HEADER_BYTES - n)]);
      try {
        decodeHeader(padded);
      } catch (err) {
        this.broken = err as ProtocolError;
        this.clear();
        throw err;
      }
    }
  }
}
