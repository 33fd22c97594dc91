/**
 * The history block of a container body (tag 0x02): each entry's previous
 * values with their times, newest first (docs/container-format.md):
 *
 *   u8 tag 0x02, u32 length L of what follows, then within L bytes:
 *   u32 name count; per name in ascending order: name length (u8 in a
 *   version-1 body, u16 in a version-2 body: NameCodec), name,
 *   u8 version count (1..MAX_HISTORY_KEEP), then per version: u64 changed
 *   at, u64 replaced at (ms since 1970, 0 = unknown), u32 value length, value.
 *
 * Pure encoding and decoding into and out of buffers the caller owns (secure
 * buffers: the values are secrets). Decoded values are views into `plain`.
 */
import { MAX_ENTRIES, MAX_VALUE_BYTES } from './names.js';

/** How a body version writes and checks names: the width of their length field and their rule. */
export interface NameCodec {
  lengthBytes: 1 | 2;
  valid(name: string): boolean;
  /** What an invalid name is called in an error. */
  what: string;
}

export const HISTORY_TAG = 0x02;
/** Previous values kept per entry unless the vault.history_keep setting says otherwise. */
export const DEFAULT_HISTORY_KEEP = 10;
/** The most previous values one entry can keep (the cap of the history_keep setting too). */
export const MAX_HISTORY_KEEP = 100;
/** Most names with a history (entries removed with their history kept count too). */
export const MAX_HISTORY_NAMES = MAX_ENTRIES;

/** One previous value of an entry. */
export interface PastValue {
  value: Uint8Array;
  /** When it became the entry's value (ms since 1970; 0 = unknown). */
  changedAt: number;
  /** When it stopped being the value: replaced, restored over or removed (0 = unknown). */
  replacedAt: number;
}

/** Entry name -> its previous values, newest first; never an empty list. */
export type History = ReadonlyMap<string, readonly PastValue[]>;

const VERSION_OVERHEAD = 8 + 8 + 4;

/** Bytes the block takes, tag and length included, with names as a version-2 body writes them. */
export function historyBlockSize(history: History): number {
  let n = 1 + 4 + 4;
  for (const [name, versions] of history) {
    n += 2 + name.length + 1;
    for (const v of versions) n += VERSION_OVERHEAD + v.value.length;
  }
  return n;
}

function time(t: number): bigint {
  return BigInt(Number.isSafeInteger(t) && t > 0 ? t : 0);
}

/** Writes the block at `o` of `out` (which has room: historyBlockSize), names with u16 lengths; returns the offset after it. */
export function writeHistoryBlock(out: Buffer, o: number, history: History): number {
  o = out.writeUInt8(HISTORY_TAG, o);
  const lengthAt = o;
  o += 4;
  const start = o;
  const names = [...history.keys()].sort();
  o = out.writeUInt32LE(names.length, o);
  for (const name of names) {
    const versions = history.get(name)!;
    o = out.writeUInt16LE(name.length, o);
    o += out.write(name, o, 'latin1');
    o = out.writeUInt8(versions.length, o);
    for (const v of versions) {
      o = out.writeBigUInt64LE(time(v.changedAt), o);
      o = out.writeBigUInt64LE(time(v.replacedAt), o);
      o = out.writeUInt32LE(v.value.length, o);
      out.set(v.value, o);
      o += v.value.length;
    }
  }
  out.writeUInt32LE(o - start, lengthAt);
  return o;
}

/**
 * Reads the block whose tag is at `o`. Every malformation is `bad(why)`:
 * a truncated block, lengths past its end, counts over the caps, names
 * invalid or out of order, times past 2^53-1, bytes left over in it.
 */
export function readHistoryBlock(
  plain: Buffer,
  o: number,
  bad: (why: string) => Error,
  names: NameCodec,
): { history: Map<string, PastValue[]>; end: number } {
  if (o + 1 + 4 > plain.length) throw bad('truncated history block');
  const length = plain.readUInt32LE(o + 1);
  const start = o + 5;
  const end = start + length;
  if (end > plain.length) throw bad('history block length past the end');
  const need = (at: number, n: number, what: string) => {
    if (at + n > end) throw bad(`truncated history block (${what})`);
  };
  o = start;
  need(o, 4, 'name count');
  const count = plain.readUInt32LE(o);
  o += 4;
  if (count > MAX_HISTORY_NAMES) throw bad('too many names in the history');
  const history = new Map<string, PastValue[]>();
  let previous = '';
  for (let i = 0; i < count; i++) {
    const w = names.lengthBytes;
    need(o, w, 'name');
    const nameLen = w === 1 ? plain.readUInt8(o) : plain.readUInt16LE(o);
    need(o + w, nameLen + 1, 'name');
    const name = plain.toString('latin1', o + w, o + w + nameLen);
    o += w + nameLen;
    if (!names.valid(name)) throw bad(`invalid ${names.what} in the history`);
    if (name <= previous) throw bad('history names out of order or repeated');
    previous = name;
    const k = plain.readUInt8(o);
    o += 1;
    if (k === 0 || k > MAX_HISTORY_KEEP)
      throw bad(`history of ${name} holds ${k} versions (1 to ${MAX_HISTORY_KEEP} allowed)`);
    const versions: PastValue[] = [];
    for (let j = 0; j < k; j++) {
      need(o, VERSION_OVERHEAD, 'version');
      const changedAt = plain.readBigUInt64LE(o);
      const replacedAt = plain.readBigUInt64LE(o + 8);
      const valueLen = plain.readUInt32LE(o + 16);
      o += VERSION_OVERHEAD;
      if (changedAt > BigInt(Number.MAX_SAFE_INTEGER) || replacedAt > BigInt(Number.MAX_SAFE_INTEGER))
        throw bad('history time out of range');
      if (valueLen > MAX_VALUE_BYTES || o + valueLen > end) throw bad('history value length out of range');
      versions.push({
        value: plain.subarray(o, o + valueLen),
        changedAt: Number(changedAt),
        replacedAt: Number(replacedAt),
      });
      o += valueLen;
    }
    history.set(name, versions);
  }
  if (o !== end) throw bad('history block length does not match its content');
  return { history, end };
}

/**
 * `history` cut to fit `budget` bytes as a block (null when not even an
 * empty one fits, or there is nothing to keep): the oldest versions (by
 * replaced-at) go first, and at most MAX_HISTORY_NAMES names stay, those
 * replaced last. The current entries always come first; history is what fits.
 */
export function fitHistory(history: History, budget: number): History | null {
  if (history.size === 0) return null;
  let names = [...history.keys()];
  if (names.length > MAX_HISTORY_NAMES) {
    const newest = (n: string) => Math.max(...history.get(n)!.map((v) => v.replacedAt));
    names = names.sort((a, b) => newest(b) - newest(a)).slice(0, MAX_HISTORY_NAMES);
    history = new Map(names.map((n) => [n, history.get(n)!]));
  }
  let size = historyBlockSize(history);
  if (size <= budget) return history;
  const all = names.flatMap((name) => history.get(name)!.map((v) => ({ name, v })));
  all.sort((a, b) => a.v.replacedAt - b.v.replacedAt);
  const dropped = new Set<PastValue>();
  for (const { name, v } of all) {
    if (size <= budget) break;
    dropped.add(v);
    size -= VERSION_OVERHEAD + v.value.length;
    if (history.get(name)!.every((x) => dropped.has(x))) size -= 2 + name.length + 1;
  }
  if (size > budget) return null;
  const out = new Map<string, PastValue[]>();
  for (const name of names) {
    const kept = history.get(name)!.filter((v) => !dropped.has(v));
    if (kept.length > 0) out.set(name, kept);
  }
  return out.size > 0 ? out : null;
}
