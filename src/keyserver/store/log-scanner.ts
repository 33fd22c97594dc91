/**
 * Reads the records of a store log front to back and says which bytes it
 * could not read, without stopping at them: a damaged record costs that
 * record, never the ones behind it (LevelDB's log reader drops the rest of
 * a 32 KiB block and resynchronises at the next; Bitcask skips a record whose
 * checksum fails by its length field; stuffing lets this reader resume at
 * the very next record).
 *
 * Version 2 (stuffed, log-format.ts): a record is the bytes up to the next
 * 0x00. Reading is "in step" at the file's first record and after every
 * record read. In step, a segment that holds one whole good frame followed
 * by more bytes is a record whose delimiter was damaged: the frame is kept
 * and the byte after it skipped. Out of step (after damage), a segment is a
 * record only if it is exactly one good frame, so reading can resume only at
 * a real delimiter, and a frame can only be taken from where a record began.
 *
 * Version 1 (frames back to back): after damage, the next offset where a
 * frame of a known type decodes with a good checksum AND is followed by
 * another such frame (or ends the file) is taken as the next record. Lengths
 * are bounded (MAX_RECORD), so a search costs little; bytes inside a value
 * could pass this test only by a 2^-64 chance or by design (a publisher's
 * key bytes), which is why version 2 exists and version 1 is only read.
 */
import type { FileHandle } from 'node:fs/promises';
import { decodeFrame } from './cobs.js';
import { HEADER_SIZE, MAX_FRAME, MAX_SEGMENT, type LogFormat } from './log-format.js';
import { MAX_RECORD, RecordDecodeError, decodeRecord, readFrame, type StoreRecord } from './records.js';

export type ScanEvent =
  /** A good record (rec undefined: a type this version does not know). `frame` is valid until the next event. */
  | { kind: 'record'; offset: number; end: number; rec: StoreRecord | undefined; frame: Uint8Array }
  | { kind: 'damage'; from: number; to: number; reason: string };

const CHUNK = 1 << 20;

/** A sliding window over a file: the bytes a scan needs next, read in 1 MiB chunks. */
export class FileWindow {
  private buf: Buffer = Buffer.alloc(0);
  private base = 0;
  private readonly chunk: Buffer;

  constructor(
    private readonly handle: FileHandle,
    readonly size: number,
  ) {
    this.chunk = Buffer.allocUnsafe(CHUNK + 2 * MAX_SEGMENT + 16);
  }

  /** Whether [from, from + n) (or up to the end of the file) is loaded. */
  has(from: number, n: number): boolean {
    return from >= this.base && Math.min(from + n, this.size) <= this.base + this.buf.length;
  }

  /** Makes [from, from + n) available (or up to the end of the file). */
  async ensure(from: number, n: number): Promise<void> {
    if (this.has(from, n)) return;
    const want = Math.min(Math.max(n, CHUNK), this.chunk.length, this.size - from);
    let got = 0;
    while (got < want) {
      const r = await this.handle.read(this.chunk, got, want - got, from + got);
      if (r.bytesRead === 0) break;
      got += r.bytesRead;
    }
    this.buf = this.chunk.subarray(0, got);
    this.base = from;
  }

  /** Bytes [from, to) of the file; only within what the last ensure() covered. */
  view(from: number, to: number): Uint8Array {
    return this.buf.subarray(from - this.base, Math.min(to, this.size) - this.base);
  }

  /** Offset of the first 0x00 in [from, to) of what is loaded, or -1. */
  indexOfZero(from: number, to: number): number {
    const end = Math.min(to, this.base + this.buf.length);
    if (from >= end) return -1;
    const at = this.buf.indexOf(0, from - this.base);
    return at === -1 || at + this.base >= end ? -1 : at + this.base;
  }
}

/** Size of a frame whose length field says `length`, or undefined when no record is that long. */
function frameSize(length: number): number | undefined {
  return length < 1 || length > MAX_RECORD ? undefined : length + 8;
}

type Judged = { ok: true; rec: StoreRecord | undefined } | { ok: false; reason: string };

/** Decodes a frame whose bytes are `frame`: checksum, then payload. */
function judge(frame: Uint8Array, knownOnly: boolean): Judged {
  const f = readFrame(frame, 0);
  if (f.kind === 'incomplete') return { ok: false, reason: 'a record cut short' };
  if (f.kind === 'damaged') return { ok: false, reason: f.reason };
  if (f.size !== frame.length) return { ok: false, reason: 'the record does not end where its length says' };
  try {
    const rec = decodeRecord(f.type, f.body);
    if (rec === undefined && knownOnly) return { ok: false, reason: `unknown record type ${f.type}` };
    return { ok: true, rec };
  } catch (err) {
    if (!(err instanceof RecordDecodeError)) throw err;
    return { ok: false, reason: `undecodable record of type ${f.type}: ${err.message}` };
  }
}

/** Scans a version 2 (stuffed) log from `start` to the end of the file. */
export async function* scanStuffed(win: FileWindow, start = HEADER_SIZE): AsyncGenerator<ScanEvent> {
  const out = new Uint8Array(MAX_FRAME + 512);
  const size = win.size;
  let pos = start;
  let inStep = true;
  while (pos < size) {
    await win.ensure(pos, MAX_SEGMENT + 1);
    const zero = win.indexOfZero(pos, pos + MAX_SEGMENT + 1);
    if (zero === -1) {
      const reachedEnd = pos + MAX_SEGMENT + 1 >= size;
      if (reachedEnd) {
        yield { kind: 'damage', from: pos, to: size, reason: 'torn record at the end' };
        return;
      }
      // Longer than any record: damage up to the next 0x00, wherever that is.
      let from = pos + MAX_SEGMENT + 1;
      let next = -1;
      while (from < size && next === -1) {
        await win.ensure(from, CHUNK);
        next = win.indexOfZero(from, from + CHUNK);
        if (next === -1) from = Math.min(size, from + CHUNK);
      }
      const to = next === -1 ? size : next + 1;
      yield { kind: 'damage', from: pos, to, reason: 'no record boundary where one must be' };
      pos = to;
      inStep = false;
      continue;
    }
    const seg = win.view(pos, zero);
    const d = decodeFrame(seg, out, frameSize);
    if (d.ok && (d.used === seg.length || inStep)) {
      const frame = out.subarray(0, d.size);
      const j = judge(frame, false);
      if (j.ok) {
        const end = pos + d.used;
        if (d.used === seg.length) {
          yield { kind: 'record', offset: pos, end: zero + 1, rec: j.rec, frame };
          pos = zero + 1;
        } else {
          // In step and whole, but no 0x00 after it: its delimiter was damaged.
          yield { kind: 'record', offset: pos, end, rec: j.rec, frame };
          yield { kind: 'damage', from: end, to: end + 1, reason: 'damaged record delimiter' };
          pos = end + 1;
        }
        inStep = true;
        continue;
      }
      yield { kind: 'damage', from: pos, to: zero + 1, reason: j.reason };
    } else {
      const reason = d.ok ? 'a record followed by stray bytes' : d.reason;
      yield { kind: 'damage', from: pos, to: zero + 1, reason };
    }
    pos = zero + 1;
    inStep = false;
  }
}

/** The frame at `at` of a version 1 log, judged; `size` is its length on disk. */
async function frameAt(
  win: FileWindow,
  at: number,
  knownOnly: boolean,
): Promise<(Judged & { size: number; frame?: Uint8Array }) | { ok: false; reason: string; size: 0 }> {
  await win.ensure(at, 4);
  const head = win.view(at, at + 4);
  if (head.length < 4) return { ok: false, reason: 'torn record at the end', size: 0 };
  const length = ((head[0]! << 24) >>> 0) + (head[1]! << 16) + (head[2]! << 8) + head[3]!;
  const size = frameSize(length);
  if (size === undefined) return { ok: false, reason: `impossible record length ${length}`, size: 0 };
  if (at + size > win.size) return { ok: false, reason: 'torn record at the end', size: 0 };
  await win.ensure(at, size);
  const frame = win.view(at, at + size);
  const j = judge(frame, knownOnly);
  return j.ok ? { ...j, size, frame } : { ...j, size: 0 };
}

/** Scans a version 1 log (frames back to back) from `start` to the end of the file. */
export async function* scanFrames(win: FileWindow, start = HEADER_SIZE): AsyncGenerator<ScanEvent> {
  const size = win.size;
  let pos = start;
  while (pos < size) {
    const f = await frameAt(win, pos, false);
    if (f.ok && f.frame) {
      yield { kind: 'record', offset: pos, end: pos + f.size, rec: f.rec, frame: f.frame };
      pos += f.size;
      continue;
    }
    const reason = f.ok ? 'unreadable record' : f.reason;
    let next = -1;
    for (let c = pos + 1; c < size && next === -1; c++) {
      // Most offsets fail on their length alone: no await for them.
      if (!win.has(c, 4)) await win.ensure(c, 4);
      const head = win.view(c, c + 4);
      if (head.length < 4) break;
      const length = ((head[0]! << 24) >>> 0) + (head[1]! << 16) + (head[2]! << 8) + head[3]!;
      const candSize = frameSize(length);
      if (candSize === undefined || c + candSize > size) continue;
      const cand = await frameAt(win, c, true);
      if (!cand.ok) continue;
      const after = c + cand.size;
      if (after === size || (await frameAt(win, after, true)).ok) next = c;
    }
    if (next === -1) {
      yield { kind: 'damage', from: pos, to: size, reason };
      return;
    }
    yield { kind: 'damage', from: pos, to: next, reason };
    pos = next;
  }
}

/** The scan of a log of `format`. */
export function scanLog(format: LogFormat, win: FileWindow, start = HEADER_SIZE): AsyncGenerator<ScanEvent> {
  return format === 2 ? scanStuffed(win, start) : scanFrames(win, start);
}
