/**
 * Bounds-checked reading and writing of payload fields. Every read past the
 * end, and any trailing byte, is a MALFORMED_PAYLOAD error naming the field.
 */
import { ProtocolError } from './errors.js';

export class Reader {
  private offset = 0;

  constructor(
    private readonly buf: Buffer,
    private readonly what: string,
  ) {}

  private need(n: number, field: string): void {
    if (this.offset + n > this.buf.length) {
      throw new ProtocolError('MALFORMED_PAYLOAD', `${this.what}: payload ends inside ${field}`);
    }
  }

  u8(field: string): number {
    this.need(1, field);
    return this.buf.readUInt8(this.offset++);
  }

  u16(field: string): number {
    this.need(2, field);
    const v = this.buf.readUInt16LE(this.offset);
    this.offset += 2;
    return v;
  }

  u32(field: string): number {
    this.need(4, field);
    const v = this.buf.readUInt32LE(this.offset);
    this.offset += 4;
    return v;
  }

  i32(field: string): number {
    this.need(4, field);
    const v = this.buf.readInt32LE(this.offset);
    this.offset += 4;
    return v;
  }

  u64(field: string): bigint {
    this.need(8, field);
    const v = this.buf.readBigUInt64LE(this.offset);
    this.offset += 8;
    return v;
  }

  /** A view (not a copy) of the next n bytes. */
  bytes(n: number, field: string): Buffer {
    this.need(n, field);
    const v = this.buf.subarray(this.offset, this.offset + n);
    this.offset += n;
    return v;
  }

  /** UTF-8 text of n bytes; invalid UTF-8 is an error, not a replacement character. */
  utf8(n: number, field: string): string {
    const raw = this.bytes(n, field);
    try {
      return new TextDecoder('utf-8', { fatal: true }).decode(raw);
    } catch {
      throw new ProtocolError('MALFORMED_PAYLOAD', `${this.what}: ${field} is not valid UTF-8`);
    }
  }

  rest(): Buffer {
    const v = this.buf.subarray(this.offset);
    this.offset = this.buf.length;
    return v;
  }

  end(): void {
    if (this.offset !== this.buf.length) {
      throw new ProtocolError(
        'MALFORMED_PAYLOAD',
        `${this.what}: ${this.buf.length - this.offset} unexpected trailing bytes`,
      );
    }
  }
}

/** Collects fields, then writes them into one buffer (optionally a secure one). */
export class Writer {
  private parts: Array<(buf: Buffer, at: number) => number> = [];
  private size = 0;

  private add(n: number, write: (buf: Buffer, at: number) => void): this {
    this.parts.push((buf, at) => {
      write(buf, at);
      return at + n;
    });
    this.size += n;
    return this;
  }

  u8(v: number): this {
    return this.add(1, (b, at) => b.writeUInt8(v, at));
  }

  u16(v: number): this {
    return this.add(2, (b, at) => b.writeUInt16LE(v, at));
  }

  u32(v: number): this {
    return this.add(4, (b, at) => b.writeUInt32LE(v, at));
  }

  i32(v: number): this {
    return this.add(4, (b, at) => b.writeInt32LE(v, at));
  }

  u64(v: bigint): this {
    return this.add(8, (b, at) => b.writeBigUInt64LE(v, at));
  }

  bytes(v: Buffer): this {
    return this.add(v.length, (b, at) => v.copy(b, at));
  }

  get length(): number {
    return this.size;
  }

  /** Writes into `alloc(length)`; pass sodium_malloc to keep the result in secure memory. */
  finish(alloc: (n: number) => Buffer = (n) => Buffer.alloc(n)): Buffer {
    const out = alloc(this.size);
    let at = 0;
    for (const p of this.parts) at = p(out, at);
    return out;
  }
}
