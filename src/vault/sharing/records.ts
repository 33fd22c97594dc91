/**
 * What a vault remembers about each shared container it uses, one small JSON
 * file per local name, `<vault>/shared/<name>.json`:
 *
 * - the container id, so a file swapped for another container is refused;
 * - the owner's keys, pinned when the container was first accepted, so only
 *   that owner's signature can change the recipient list;
 * - the link target, for a container file that lives outside the vault;
 * - the last revision seen (number, membership epoch, hash, and per member the
 *   revision they last wrote), against which rollback and divergence are judged.
 *
 * Nothing here is secret (the container header shows the same), so it is plain
 * JSON; it is written atomically under the vault lock.
 */
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { VaultError } from '../errors.js';
import { atomicWrite, ensureDir, isTempName, readBounded, removeFile } from '../fs-atomic.js';
import { byCodeUnits, type ContainerName, type ContainerRef, containerNameOrNull, refName } from '../names.js';
import { MAX_DATE_MS } from './format.js';

export const SHARED_DIR = 'shared';
const FORMAT = 'stash-shared';
const VERSION = 1;
const MAX_RECORD_BYTES = 64 * 1024;

/** The revision a vault saw last: enough to judge the next one. */
export interface SeenRevision {
  revision: number;
  epoch: number;
  hash: Buffer;
  /** Ed25519 public key (hex) of each member -> the revision they last wrote. */
  lastWrites: Map<string, number>;
  /** Who wrote it (Ed25519 hex) and when (ms since 1970), for messages. */
  writer: string;
  writtenAt: number;
}

export interface SharedRecord {
  name: string;
  containerId: Buffer;
  owner: { x25519: Buffer; ed25519: Buffer };
  /** Absolute path of a linked file, or null for a copy in containers/. */
  link: string | null;
  seen: SeenRevision;
}

export function sharedDir(dir: string): string {
  return join(dir, SHARED_DIR);
}

export function recordPath(dir: string, name: string): string {
  return join(sharedDir(dir), `${name}.json`);
}

/**
 * This vault's own last version of a linked container, as it wrote it (or
 * tried to): a signed file like any other, ciphertext only. Someone else's
 * write (a git pull, a sync client, an old stash) can replace the linked file
 * after ours; with this copy, `stash container merge NAME COPY` brings ours back.
 */
export function ownCopyPath(dir: string, name: string): string {
  return join(sharedDir(dir), `${name}.last-write.stash`);
}

function encode(r: SharedRecord): Buffer {
  const doc = {
    format: FORMAT,
    formatVersion: VERSION,
    name: r.name,
    containerId: r.containerId.toString('hex'),
    owner: { x25519: r.owner.x25519.toString('hex'), ed25519: r.owner.ed25519.toString('hex') },
    link: r.link,
    seen: {
      revision: r.seen.revision,
      epoch: r.seen.epoch,
      hash: r.seen.hash.toString('hex'),
      writer: r.seen.writer,
      writtenAt: r.seen.writtenAt,
      lastWrites: Object.fromEntries([...r.seen.lastWrites].sort(([a], [b]) => byCodeUnits(a, b))),
    },
  };
  return Buffer.from(`${JSON.stringify(doc, null, 2)}\n`, 'utf8');
}

function decode(bytes: Buffer, name: string, path: string): SharedRecord {
  const bad = (why: string) => new VaultError('VAULT_CORRUPT', `${path} is damaged: ${why}`);
  let d: Record<string, unknown>;
  try {
    d = JSON.parse(bytes.toString('utf8')) as Record<string, unknown>;
  } catch {
    throw bad('not valid JSON');
  }
  if (typeof d !== 'object' || d === null || d.format !== FORMAT) throw bad('not a stash shared-container record');
  if (d.formatVersion !== VERSION) throw bad(`unsupported format version ${JSON.stringify(d.formatVersion)}`);
  const hex = (v: unknown, n: number, what: string): Buffer => {
    if (typeof v !== 'string' || v.length !== n * 2 || !/^[0-9a-f]+$/.test(v))
      throw bad(`${what} is not ${n} bytes of hex`);
    return Buffer.from(v, 'hex');
  };
  const count = (v: unknown, what: string): number => {
    if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 0) throw bad(`${what} is not a whole number`);
    return v;
  };
  const time = (v: unknown, what: string): number => {
    const n = count(v, what);
    if (n > MAX_DATE_MS) throw bad(`${what} is not a date`);
    return n;
  };
  const owner = (d.owner ?? {}) as Record<string, unknown>;
  if (d.name !== name) throw bad(`it describes ${JSON.stringify(d.name)}, not ${JSON.stringify(name)}`);
  if (d.link !== null && (typeof d.link !== 'string' || d.link.length === 0 || d.link.length > 4096))
    throw bad('link is not a path');
  const s = d.seen as Record<string, unknown> | null;
  if (typeof s !== 'object' || s === null) throw bad('seen is missing');
  const lw = s.lastWrites as Record<string, unknown> | null;
  if (typeof lw !== 'object' || lw === null) throw bad('seen.lastWrites is missing');
  const lastWrites = new Map<string, number>();
  for (const [k, v] of Object.entries(lw))
    lastWrites.set(hex(k, 32, 'a member key').toString('hex'), count(v, 'a last-write revision'));
  return {
    name,
    containerId: hex(d.containerId, 16, 'containerId'),
    owner: { x25519: hex(owner.x25519, 32, 'owner.x25519'), ed25519: hex(owner.ed25519, 32, 'owner.ed25519') },
    link: d.link as string | null,
    seen: {
      revision: count(s.revision, 'seen.revision'),
      epoch: count(s.epoch, 'seen.epoch'),
      hash: hex(s.hash, 32, 'seen.hash'),
      writer: hex(s.writer, 32, 'seen.writer').toString('hex'),
      writtenAt: time(s.writtenAt, 'seen.writtenAt'),
      lastWrites,
    },
  };
}

/** The record of shared container `ref`, or null when this vault has none. */
export function readRecord(dir: string, ref: ContainerRef): SharedRecord | null {
  const name = refName(ref);
  const path = recordPath(dir, name);
  const bytes = readBounded(
    path,
    MAX_RECORD_BYTES,
    () => new VaultError('VAULT_CORRUPT', `${path} is not a small regular file`),
  );
  return bytes === null ? null : decode(bytes, name, path);
}

/** Writes (or replaces) a record. The caller holds the vault lock. */
export function writeRecord(dir: string, record: SharedRecord): void {
  ensureDir(sharedDir(dir));
  atomicWrite(recordPath(dir, record.name), [encode(record)]);
}

/** Removes a record (and this vault's own last version); false when there was no record. The caller holds the vault lock. */
export function removeRecord(dir: string, name: string): boolean {
  removeFile(ownCopyPath(dir, name));
  return removeFile(recordPath(dir, name));
}

/** Every record, by name; a damaged one is returned as its error. */
export function listRecords(
  dir: string,
): Array<{ name: ContainerName; record: SharedRecord | null; problem: string | null }> {
  let names: string[];
  try {
    names = readdirSync(sharedDir(dir));
  } catch {
    return [];
  }
  const out: Array<{ name: ContainerName; record: SharedRecord | null; problem: string | null }> = [];
  for (const file of names.sort()) {
    if (isTempName(file) || !file.endsWith('.json')) continue;
    const name = containerNameOrNull(file.slice(0, -'.json'.length));
    if (name === null) continue;
    try {
      const record = readRecord(dir, { name });
      if (record) out.push({ name, record, problem: null });
    } catch (err) {
      if (!(err instanceof VaultError)) throw err;
      out.push({ name, record: null, problem: err.message });
    }
  }
  return out;
}
