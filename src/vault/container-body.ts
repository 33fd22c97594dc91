/**
 * The plaintext of a container body: a map of stored key (an entry path, or
 * PATH#FIELD: entry-path.ts) -> value bytes. Version 2, which every write
 * makes:
 *
 *   u32 0xFFFFFFFF, u8 body version 2, u32 count, then per key in code-unit
 *   order: u16 name length, name (ASCII), u32 value length, value; then,
 *   optionally, the change times (u8 tag 0x01, then per key in the same
 *   order a u64 of milliseconds since 1970, 0 = unknown); then, optionally,
 *   the history (u8 tag 0x02, history-block.ts); then zero bytes up to the
 *   next multiple of 256.
 *
 * Version 1 (read, never written) starts with the u32 count (at most 4096,
 * so never 0xFFFFFFFF), has u8 name lengths and flat, environment-shaped
 * names. Bodies written before the change times (or the history) existed end in
 * zero padding where the block would start, so the non-zero tag tells them
 * apart and old bodies decode unchanged (docs/container-format.md). Any other
 * non-zero byte there is refused, by this release and every earlier one, so
 * no release rewrites a body without a block it cannot read. The padding hides the exact
 * size of the secrets from the file size. The plaintext always lives in one
 * secure buffer; decoded values are views into it, so one wipe clears them all.
 */
import { VaultError } from './errors.js';
import {
  fitHistory,
  HISTORY_TAG,
  historyBlockSize,
  readHistoryBlock,
  writeHistoryBlock,
  type History,
  type NameCodec,
} from './history-block.js';
import { isStoredKey } from './entry-path.js';
import { FLAT_NAME_RE, MAX_BODY_BYTES, MAX_ENTRIES, MAX_VALUE_BYTES } from './names.js';
import { secureAlloc, wipe } from './secure.js';

export const PAD_BLOCK = 256;
/** First u32 of a versioned body (a version-1 body starts with its entry count, at most 4096). */
const VERSIONED = 0xffffffff;
/** The body version every write makes. */
export const BODY_VERSION = 2;
/** Bytes before the first entry: the marker, the version and the count. */
const V2_HEAD = 4 + 1 + 4;
const V1_NAMES: NameCodec = { lengthBytes: 1, valid: (n) => FLAT_NAME_RE.test(n), what: 'entry name' };
const V2_NAMES: NameCodec = { lengthBytes: 2, valid: isStoredKey, what: 'entry path or field' };
/** First byte of the optional change-times block (old bodies have a zero padding byte there). */
const TIMES_TAG = 0x01;

/** Entries decoded from a container; values are views into one secure buffer. */
export type Entries = Map<string, Buffer>;

const BACKING = Symbol('stash.entries.backing');
const TIMES = Symbol('stash.entries.times');
const HISTORY = Symbol('stash.entries.history');
type Backed = Entries & { [BACKING]?: Buffer };
/** Any entry map may carry its change times (ms since 1970; 0 = unknown) under TIMES. */
type Timed = ReadonlyMap<string, Uint8Array> & { [TIMES]?: ReadonlyMap<string, number> };
/** Any entry map may carry its entries' previous values under HISTORY (views into secure buffers). */
type Historied = ReadonlyMap<string, Uint8Array> & { [HISTORY]?: History };

/** The previous values the map carries (from decodeBody or withHistory); empty when none. */
export function historyOf(entries: ReadonlyMap<string, Uint8Array>): History {
  return (entries as Historied)[HISTORY] ?? new Map();
}

/**
 * `next` marked with `history`, which travels with the map into encodeBody.
 * Its values must stay alive (not wiped) until then.
 */
export function withHistory<T extends ReadonlyMap<string, Uint8Array>>(next: T, history: History): T {
  (next as Historied)[HISTORY] = history;
  return next;
}

/**
 * When each entry last changed, as milliseconds since 1970, 0 when unknown
 * (written before change times were kept, or left out of a full container).
 * Only maps from decodeBody or withChangeTimes carry times; others give 0.
 */
export function changeTime(entries: ReadonlyMap<string, Uint8Array>, name: string): number {
  return (entries as Timed)[TIMES]?.get(name) ?? 0;
}

/**
 * `next` (a new map of entries made from `previous`) marked with change
 * times: `changed` names now, the others as they were in `previous`. The
 * times travel with the map into encodeBody.
 */
export function withChangeTimes<T extends ReadonlyMap<string, Uint8Array>>(
  next: T,
  previous: ReadonlyMap<string, Uint8Array>,
  changed: Iterable<string>,
  now = Date.now(),
): T {
  const times = new Map<string, number>();
  for (const name of next.keys()) times.set(name, changeTime(previous, name));
  for (const name of changed) if (next.has(name)) times.set(name, now);
  (next as Timed)[TIMES] = times;
  return next;
}

/**
 * `next` marked with the change time each entry has in the map that `from`
 * names for it (a merge takes each entry, and its time, from one of two sides).
 */
export function withChangeTimesFrom<T extends ReadonlyMap<string, Uint8Array>>(
  next: T,
  from: (name: string) => ReadonlyMap<string, Uint8Array>,
): T {
  const times = new Map<string, number>();
  for (const name of next.keys()) times.set(name, changeTime(from(name), name));
  (next as Timed)[TIMES] = times;
  return next;
}

function timesBlockSize(count: number): number {
  return 1 + 8 * count;
}

/** Bytes the serialized entries take before padding (version 2). */
export function bodySize(entries: ReadonlyMap<string, Uint8Array>): number {
  let n = V2_HEAD;
  for (const [name, value] of entries) n += 2 + name.length + 4 + value.length;
  return n;
}

/**
 * Serializes `entries` into a new padded secure buffer, with their change
 * times when the map carries them (from decodeBody or withChangeTimes) and
 * they fit, then as much of their history (historyOf) as still fits, oldest
 * versions dropped first: neither pushes the plaintext over the 1 MiB limit,
 * so a container filled to the limit keeps working and just records less.
 * CONTAINER_FULL when the entries are over the limits; the caller validated
 * names and single values already.
 */
export function encodeBody(entries: ReadonlyMap<string, Uint8Array>): Buffer {
  if (entries.size > MAX_ENTRIES) {
    throw new VaultError('CONTAINER_FULL', `a container holds at most ${MAX_ENTRIES} entries`);
  }
  const size = bodySize(entries);
  if (size > MAX_BODY_BYTES) {
    throw new VaultError(
      'CONTAINER_FULL',
      `the container would hold ${size} bytes; the limit is ${MAX_BODY_BYTES} bytes (1 MiB)`,
    );
  }
  const times = (entries as Timed)[TIMES];
  const withTimes = times !== undefined && entries.size > 0 && size + timesBlockSize(entries.size) <= MAX_BODY_BYTES;
  const before = size + (withTimes ? timesBlockSize(entries.size) : 0);
  const history = fitHistory(historyOf(entries), MAX_BODY_BYTES - before);
  const total = before + (history ? historyBlockSize(history) : 0);
  const out = secureAlloc(Math.ceil((total + 1) / PAD_BLOCK) * PAD_BLOCK);
  const names = [...entries.keys()].sort();
  let o = out.writeUInt32LE(VERSIONED, 0);
  o = out.writeUInt8(BODY_VERSION, o);
  o = out.writeUInt32LE(entries.size, o);
  for (const name of names) {
    const value = entries.get(name)!;
    o = out.writeUInt16LE(name.length, o);
    o += out.write(name, o, 'latin1');
    o = out.writeUInt32LE(value.length, o);
    out.set(value, o);
    o += value.length;
  }
  if (withTimes) {
    o = out.writeUInt8(TIMES_TAG, o);
    for (const name of names) {
      const t = times.get(name) ?? 0;
      o = out.writeBigUInt64LE(BigInt(Number.isSafeInteger(t) && t > 0 ? t : 0), o);
    }
  }
  if (history) writeHistoryBlock(out, o, history);
  return out; // the rest is already zero
}

/** The body version of `plain` (1 or 2), its names' codec and the offset of its entry count. */
function bodyLayout(plain: Buffer, bad: (why: string) => Error): { names: NameCodec; countAt: number } {
  if (plain.readUInt32LE(0) !== VERSIONED) return { names: V1_NAMES, countAt: 0 };
  if (plain.length < V2_HEAD) throw bad('bad length');
  const version = plain.readUInt8(4);
  if (version !== BODY_VERSION)
    throw bad(`body version ${version}; this stash reads versions 1 and 2: written by a newer stash?`);
  return { names: V2_NAMES, countAt: 5 };
}

/**
 * Parses a decrypted body (version 1 or 2) strictly: sorted unique valid
 * names, values within limits, no trailing garbage, zero padding to a block
 * boundary. The returned map keeps `plain` alive; release both with wipeEntries().
 */
export function decodeBody(plain: Buffer, path: string): Entries {
  const bad = (why: string) =>
    new VaultError('CONTAINER_CORRUPT', `${path} is damaged: the decrypted body is malformed (${why})`);
  if (plain.length < 4 || plain.length % PAD_BLOCK !== 0) throw bad('bad length');
  const { names, countAt } = bodyLayout(plain, bad);
  const count = plain.readUInt32LE(countAt);
  if (count > MAX_ENTRIES) throw bad('too many entries');
  const entries: Backed = new Map();
  const w = names.lengthBytes;
  let o = countAt + 4;
  let previous = '';
  for (let i = 0; i < count; i++) {
    if (o + w > plain.length) throw bad('truncated entry');
    const nameLen = w === 1 ? plain.readUInt8(o) : plain.readUInt16LE(o);
    o += w;
    if (o + nameLen + 4 > plain.length) throw bad('truncated entry');
    const name = plain.toString('latin1', o, o + nameLen);
    o += nameLen;
    if (!names.valid(name)) throw bad(`invalid ${names.what}`);
    if (name <= previous) throw bad('entries out of order or repeated');
    previous = name;
    const valueLen = plain.readUInt32LE(o);
    o += 4;
    if (valueLen > MAX_VALUE_BYTES || o + valueLen > plain.length) throw bad('value length out of range');
    entries.set(name, plain.subarray(o, o + valueLen));
    o += valueLen;
  }
  const times = new Map<string, number>();
  if (o < plain.length && plain[o] === TIMES_TAG) {
    if (count === 0 || o + timesBlockSize(count) > plain.length) throw bad('truncated change times');
    o += 1;
    for (const name of entries.keys()) {
      const t = plain.readBigUInt64LE(o);
      o += 8;
      if (t > BigInt(Number.MAX_SAFE_INTEGER)) throw bad('change time out of range');
      times.set(name, Number(t));
    }
  }
  let history: History = new Map();
  if (o < plain.length && plain[o] === HISTORY_TAG) ({ history, end: o } = readHistoryBlock(plain, o, bad, names));
  if (o < plain.length && plain[o] !== 0)
    throw bad(`an unknown block (tag ${plain[o]}) after the entries: written by a newer stash?`);
  if (plain.length - o > PAD_BLOCK || plain.length - o < 1) throw bad('bad padding length');
  for (let i = o; i < plain.length; i++) if (plain[i] !== 0) throw bad('non-zero padding');
  entries[BACKING] = plain;
  (entries as Timed)[TIMES] = times;
  (entries as Historied)[HISTORY] = history;
  return entries;
}

/** Zeroes and frees every value of `entries` (and the buffer they live in). */
export function wipeEntries(entries: Entries): void {
  const backed = entries as Backed;
  for (const value of entries.values()) value.fill(0);
  for (const versions of historyOf(entries).values()) for (const v of versions) v.value.fill(0);
  wipe(backed[BACKING]);
  delete backed[BACKING];
  delete (entries as Timed)[TIMES];
  delete (entries as Historied)[HISTORY];
  entries.clear();
}
