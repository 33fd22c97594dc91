/**
 * Bounds-checked byte reader and writer for the binary encoding. Numbers are
 * big-endian; 64-bit values must stay below 2^53 so they fit a JS number.
 * The reader reports every problem through `fail`, so requests become HTTP 400
 * and responses become a client protocol error, each with the offset.
 */

export type Fail = (message: string) => Error;

export class Reader {
  private offset = 0;
  constructor(
    private readonly bytes: Uint8Array,
    private readonly fail: Fail,
    private readonly what: string,
  ) {}

  get position(): number {
    return this.offset;
  }

  private need(n: number, field: string): void {
    if (this.bytes.length - this.offset < n) {
      throw this.fail(
        `truncated ${this.what}: ${field} needs ${n} byte(s) at offset ${this.offset}, ${this.bytes.length - this.offset} left`,
      );
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
      return utf8.decode(raw);
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

/** One shared fatal UTF-8 decoder: decode() without { stream } keeps no state between calls. */
const utf8 = new TextDecoder('utf-8', { fatal: true });

/**
 * Writes into one growing buffer (no allocation per field). `finish()` hands
 * out the bytes written; the writer must not be used after it, but for reset().
 */
export class Writer {
  private buf: Buffer;
  private end = 0;

  constructor(initialBytes = 128) {
    this.buf = Buffer.allocUnsafe(Math.max(16, initialBytes));
  }

  /** Bytes written so far. */
  get length(): number {
    return this.end;
  }

  /** Reserves `n` bytes and returns where they start (call it before reading this.buf: it may replace it). */
  private room(n: number): number {
    const at = this.end;
    if (at + n > this.buf.length) {
      let size = this.buf.length * 2;
      while (size < at + n) size *= 2;
      const bigger = Buffer.allocUnsafe(size);
      this.buf.copy(bigger, 0, 0, at);
      this.buf = bigger;
    }
    this.end = at + n;
    return at;
  }

  u8(v: number): this {
    const at = this.room(1);
    this.buf[at] = v & 0xff;
    return this;
  }

  u16(v: number): this {
    const at = this.room(2);
    const b = this.buf;
    b[at] = (v >>> 8) & 0xff;
    b[at + 1] = v & 0xff;
    return this;
  }

  u32(v: number): this {
    this.put32(this.room(4), v);
    return this;
  }

  u64(v: number): this {
    if (!Number.isSafeInteger(v) || v < 0) throw new RangeError(`u64 out of range: ${v}`);
    const at = this.room(8);
    this.put32(at, Math.floor(v / 0x1_0000_0000));
    this.put32(at + 4, v);
    return this;
  }

  /** Big-endian u32 by byte stores: a Buffer's writeUInt32BE checks its arguments first, on every record of a store write. */
  private put32(at: number, v: number): void {
    const b = this.buf;
    b[at] = (v >>> 24) & 0xff;
    b[at + 1] = (v >>> 16) & 0xff;
    b[at + 2] = (v >>> 8) & 0xff;
    b[at + 3] = v & 0xff;
  }

  bytes(v: Uint8Array): this {
    const at = this.room(v.length);
    this.buf.set(v, at);
    return this;
  }

  /** Text with a u8 or u16 length prefix; throws if it does not fit. */
  text(v: string, lengthBytes: 1 | 2): this {
    if (v.length <= 0xff && lengthBytes === 1 && this.ascii(v)) return this;
    const n = Buffer.byteLength(v, 'utf8');
    const max = lengthBytes === 1 ? 0xff : 0xffff;
    if (n > max) throw new RangeError(`text too long for a ${lengthBytes}-byte length: ${n}`);
    if (lengthBytes === 1) this.u8(n);
    else this.u16(n);
    const at = this.room(n);
    this.buf.write(v, at, n, 'utf8');
    return this;
  }

  /**
   * Writes `v` with a u8 length prefix when it is all ASCII (codes, most
   * addresses: one byte per character, as UTF-8 has them) and returns true;
   * returns false, having written nothing, at the first other character.
   */
  private ascii(v: string): boolean {
    const n = v.length;
    const start = this.end;
    const at = this.room(1 + n);
    const b = this.buf;
    b[at] = n;
    for (let i = 0; i < n; i++) {
      const c = v.charCodeAt(i);
      if (c > 0x7f) {
        this.end = start;
        return false;
      }
      b[at + 1 + i] = c;
    }
    return true;
  }

  /** Overwrites a u32 already written at `at`. */
  setU32(at: number, v: number): this {
    if (at < 0 || at + 4 > this.end) throw new RangeError(`no u32 written at ${at}`);
    this.put32(at, v);
    return this;
  }

  /** Overwrites a byte already written at `at`. */
  setU8(at: number, v: number): this {
    if (at < 0 || at >= this.end) throw new RangeError(`no byte written at ${at}`);
    this.buf[at] = v & 0xff;
    return this;
  }

  /** A view of the bytes written from `from` on (valid until the next write). */
  written(from = 0): Uint8Array {
    return this.buf.subarray(from, this.end);
  }

  finish(): Buffer {
    return this.buf.subarray(0, this.end);
  }

  /**
   * Starts over in the same buffer, for a caller that writes chunk after
   * chunk (compaction): the bytes finish() handed out get overwritten, so
   * call it only once they have been written out. Saves a buffer per chunk
   * that V8 would free only at its next collection.
   */
  reset(): this {
    this.end = 0;
    return this;
  }
}
