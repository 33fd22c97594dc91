/**
 * The plaintext of a container body: a map of entry name -> value bytes.
 *
 *   u32 count, then per entry in name order: u8 name length, name (ASCII),
 *   u32 value length, value; then zero bytes up to the next multiple of 256.
 *
 * The padding hides the exact size of the secrets from the file size. The
 * plaintext always lives in one secure buffer; decoded values are views into
 * it, so one wipe clears them all.
 */
import { VaultError } from './errors.js';
import { ENTRY_NAME_RE, MAX_BODY_BYTES, MAX_ENTRIES, MAX_VALUE_BYTES } from './names.js';
import { secureAlloc, wipe } from './secure.js';

export const PAD_BLOCK = 256;

/** Entries decoded from a container; values are views into one secure buffer. */
export type Entries = Map<string, Buffer>;

const BACKING = Symbol('stash.entries.backing');
type Backed = Entries & { [BACKING]?: Buffer };

/** Bytes the serialized entries take before padding. */
export function bodySize(entries: ReadonlyMap<string, Uint8Array>): number {
  let n = 4;
  for (const [name, value] of entries) n += 1 + name.length + 4 + value.length;
  return n;
}

/**
 * Serializes `entries` into a new padded secure buffer. CONTAINER_FULL when
 * over the limits; the caller validated names and single values already.
 */
export function encodeBody(entries: ReadonlyMap<string, Uint8Array>): Buffer {
  if (entries.size > MAX_ENTRIES) {
    throw new VaultError('CONTAINER_FULL', `a container holds at most ${MAX_ENTRIES} entries`);
  }
  const size = bodySize(entries);
  if (size > MAX_BODY_BYTES) {
    throw new VaultError('CONTAINER_FULL', `the container would hold ${size} bytes; the limit is ${MAX_BODY_BYTES} bytes (1 MiB)`);
  }
  const out = secureAlloc(Math.ceil((size + 1) / PAD_BLOCK) * PAD_BLOCK);
  let o = out.writeUInt32LE(entries.size, 0);
  for (const name of [...entries.keys()].sort()) {
    const value = entries.get(name)!;
    o = out.writeUInt8(name.length, o);
    o += out.write(name, o, 'latin1');
    o = out.writeUInt32LE(value.length, o);
    out.set(value, o);
    o += value.length;
  }
  return out; // the rest is already zero
}

/**
 * Parses a decrypted body strictly: sorted unique valid names, values within
 * limits, no trailing garbage, zero padding to a block boundary. The returned
 * map keeps `plain` alive; release both with wipeEntries().
 */
export function decodeBody(plain: Buffer, path: string): Entries {
  const bad = (why: string) => new VaultError('CONTAINER_CORRUPT', `${path} is damaged: the decrypted body is malformed (${why})`);
  if (plain.length < 4 || plain.length % PAD_BLOCK !== 0) throw bad('bad length');
  const count = plain.readUInt32LE(0);
  if (count > MAX_ENTRIES) throw bad('too many entries');
  const entries: Backed = new Map();
  let o = 4;
  let previous = '';
  for (let i = 0; i < count; i++) {
    if (o + 1 > plain.length) throw bad('truncated entry');
    const nameLen = plain.readUInt8(o);
    o += 1;
    if (o + nameLen + 4 > plain.length) throw bad('truncated entry');
    const name = plain.toString('latin1', o, o + nameLen);
    o += nameLen;
    if (!ENTRY_NAME_RE.test(name)) throw bad('invalid entry name');
    if (name <= previous) throw bad('entries out of order or repeated');
    previous = name;
    const valueLen = plain.readUInt32LE(o);
    o += 4;
    if (valueLen > MAX_VALUE_BYTES || o + valueLen > plain.length) throw bad('value length out of range');
    entries.set(name, plain.subarray(o, o + valueLen));
    o += valueLen;
  }
  if (plain.length - o > PAD_BLOCK || plain.length - o < 1) throw bad('bad padding length');
  for (let i = o; i < plain.length; i++) if (plain[i] !== 0) throw bad('non-zero padding');
  entries[BACKING] = plain;
  return entries;
}

/** Zeroes and frees every value of `entries` (and the buffer they live in). */
export function wipeEntries(entries: Entries): void {
  const backed = entries as Backed;
  for (const value of entries.values()) value.fill(0);
  wipe(backed[BACKING]);
  delete backed[BACKING];
  entries.clear();
}
