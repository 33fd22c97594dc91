/**
 * Bounds-checked byte reader and writer for the binary encoding. Numbers are
 * big-endian; 64-bit values must stay below 2^53 so they fit a JS number.
 * The reader reports every problem through `fail`, so requests become HTTP 400
 * and responses become a client protocol error, each with the offset.
 */

export type Fail = (message: string) => Error;

export class Reader {
  private offset = 0;
  constructor(private readonly bytes: Uint8Array, private readonly fail: Fail, private readonly what: string) {}

  get position(): number {
    return this.offset;
  }

  private need(n: number, field: string): void {
    if (this.bytes.length - this.offset < n) {
      throw this.fail(`truncated ${this.what}: ${field} needs ${n} byte(s) at offset ${this.offset}, ${this.bytes.length - this.offset} left`);
    }
  }

  u8(field: string): number {
    this.need(1, field);
    return this.bytes[this.offset++]!;
  }

  u16(field: string): number {
    this.need(2, field);
    const v = (this.bytes[this.offset]! << 8) | this.bytes[this.offset + 1]!;
    this.offset += 2;
    return v;
  }

  u32(field: string): number {
    this.need(4, field);
    const b = this.bytes;
    const o = this.offset;
    this.offset += 4;
    return ((b[o]! << 24) >>> 0) + (b[o + 1]! << 16) + (b[o + 2]! << 8) + b[o + 3]!;
  }

  u64(field: string): number {
    const hi = this.u32(field);
    const lo = this.u32(field);
    if (hi > 0x1fffff) throw this.fail(`${this.what}: ${field} is too large (over 2^53)`);
    return hi * 0x1_0000_0000 + lo;
  }

  bytesOf(n: number, field: string): Uint8Array {
    this.need(n, field);
    const out = this.bytes.subarray(this.offset, this.offset + n);
    this.offset += n;
    return out;
  }

  /** UTF-8 text with a u8 (short) or u16 length prefix; must be valid UTF-8. */
  text(field: string, lengthBytes: 1 | 2): string {
    const n = lengthBytes === 1 ? this.u8(`${field} length`) : this.u16(`${field} length`);
    const raw = this.bytesOf(n, field);
    try {
      return new TextDecoder('utf-8', { fatal: true }).decode(raw);
    } catch {
      throw this.fail(`${this.what}: ${field} is not valid UTF-8`);
    }
  }

  /** Fails unless every byte was consumed. */
  end(): void {
    const left = this.bytes.length - this.offset;
    if (left !== 0) throw this.fail(`${this.what}: ${left} unexpected byte(s) after the end at offset ${this.offset}`);
  }
}

export class Writer {
  private chunks: Buffer[] = [];

  u8(v: number): this {
    this.chunks.push(Buffer.from([v & 0xff]));
    return this;
  }

  u16(v: number): this {
    const b = Buffer.alloc(2);
    b.writeUInt16BE(v);
    this.chunks.push(b);
    return this;
  }

  u32(v: number): this {
    const b = Buffer.alloc(4);
    b.writeUInt32BE(v >>> 0);
    this.chunks.push(b);
    return this;
  }

  u64(v: number): this {
    if (!Number.isSafeInteger(v) || v < 0) throw new RangeError(`u64 out of range: ${v}`);
    const b = Buffer.alloc(8);
    b.writeBigUInt64BE(BigInt(v));
    this.chunks.push(b);
    return this;
  }

  bytes(v: Uint8Array): this {
    this.chunks.push(Buffer.from(v));
    return this;
  }

  /** Text with a u8 or u16 length prefix; throws if it does not fit. */
  text(v: string, lengthBytes: 1 | 2): this {
    const b = Buffer.from(v, 'utf8');
    const max = lengthBytes === 1 ? 0xff : 0xffff;
    if (b.length > max) throw new RangeError(`text too long for a ${lengthBytes}-byte length: ${b.length}`);
    return (lengthBytes === 1 ? this.u8(b.length) : this.u16(b.length)).bytes(b);
  }

  finish(): Buffer {
    return Buffer.concat(this.chunks);
  }
}
