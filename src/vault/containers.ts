/**
 * Container operations. Each container has its own random content key, wrapped
 * by the vault key in the file's header. The CLI unwraps it once (needs the
 * vault key) and caches it in the session agent under the container id; reads
 * and writes then need only the content key.
 */
import { existsSync, readdirSync } from 'node:fs';
import { NONCE_BYTES, open, sealWithNonce, TAG_BYTES } from './aead.js';
import { decodeBody, encodeBody, wipeEntries, type Entries } from './container-body.js';
import { applyChanges, checkPolicy, DEFAULT_POLICY, type HistoryPolicy } from './entry-history.js';
import {
  CONTAINER_VERSION,
  decodeHeader,
  encodeHeader,
  keyCommitment,
  MAX_HEADER_BYTES,
  parseContainer,
  wrapAd,
  type ContainerHeader,
  type ParsedContainer,
} from './container-format.js';
import { VaultError } from './errors.js';
import { atomicWrite, ensureDir, isTempName, readBounded, readPrefix, removeFile } from './fs-atomic.js';
import { withVaultLock } from './lock.js';
import { loadMeta, requireVaultKey } from './meta-file.js';
import {
  byCodeUnits,
  type ContainerName,
  type ContainerRef,
  containerNameOrNull,
  MAX_BODY_BYTES,
  parseContainerName,
  refName,
  validateContainerName,
  validateValue,
} from './names.js';
import { entryPaths, fieldsOf, splitKey, validateStoredKey } from './entry-path.js';
import { CONTAINER_EXT, vaultPaths } from './paths.js';
import { assertKey, constantTimeEqual, KEY_BYTES, randomBytes, secureCopy, secureRandom, wipe } from './secure.js';
import { containerVersion, decodeMembership, headerLength, MAX_RECIPIENTS } from './sharing/format.js';
import { listRecords, readRecord, recordPath, removeRecord } from './sharing/records.js';

export type { Entries } from './container-body.js';
export { changeTime, wipeEntries } from './container-body.js';

/** Largest container file we will read: header, a full body, padding and tag. */
const MAX_FILE_BYTES = MAX_HEADER_BYTES + MAX_BODY_BYTES + 256 + TAG_BYTES;

export interface ContainerInfo {
  /** Checked when the info was made, so a ContainerInfo is a ContainerRef that is not checked again. */
  name: ContainerName;
  /** Container id, 32 hex characters; the agent caches content keys under it. */
  id: string;
  path: string;
  /** A shared (version 2) container: opened with the identity key, every write signed (src/vault/sharing/). */
  shared: boolean;
  /** For a linked shared container, the file outside the vault (also in `path`); else null. */
  link: string | null;
}

export interface ContainerListing extends ContainerInfo {
  size: number;
  modified: Date;
  /** Null for a healthy header; otherwise why the file cannot be used (id is then ''). */
  problem: string | null;
  /** Recipients of a shared container (the owner included); null for a private one. */
  members: number | null;
  /** A linked file that is not there (moved, or not pulled yet): size and modified mean nothing then. */
  missing: boolean;
  /** Shared: the recipients' X25519 public keys (is this vault still one of them?); null for a private one. */
  recipients: Buffer[] | null;
}

/** One wording for a linked file that is gone, in `ls`, `get` and `container list` alike. */
export function missingLinkMessage(link: string): string {
  return `linked to ${link}, which does not exist (moved, or not pulled yet?)`;
}

/** Enough of a file to read a version 1 header or a version 2 recipient list. */
const HEADER_PREFIX_BYTES = Math.max(MAX_HEADER_BYTES, headerLength(MAX_RECIPIENTS));

/**
 * Id and recipient count from a header prefix, either version; null id for a
 * file that names another container or vault. Throws CONTAINER_CORRUPT.
 */
function headerFacts(
  prefix: Buffer,
  name: ContainerName,
  vaultId: Buffer,
  path: string,
  expectedId: Buffer | null,
): { id: string; members: number | null; recipients: Buffer[] } {
  if (containerVersion(prefix) === 2) {
    const { membership } = decodeMembership(prefix, path);
    if (expectedId && !membership.containerId.equals(expectedId))
      throw corrupt(path, `it holds another container than ${name}; was the file swapped?`);
    return {
      id: membership.containerId.toString('hex'),
      members: membership.stanzas.length,
      recipients: membership.stanzas.map((st) => st.x25519),
    };
  }
  const { header } = decodeHeader(prefix, path, name);
  checkHeader(header, name, vaultId, path);
  return { id: header.containerId.toString('hex'), members: null, recipients: [] };
}

function corrupt(path: string, why: string): VaultError {
  return new VaultError('CONTAINER_CORRUPT', `${path} is damaged or was modified: ${why}`);
}

function notFound(dir: string, name: string): VaultError {
  const err = new VaultError(
    'CONTAINER_NOT_FOUND',
    `no container named ${JSON.stringify(name)} in the vault at ${dir}`,
  );
  try {
    // Names are read from the files and records alone: no password is needed to suggest one.
    err.misspelt = { word: name, candidates: listContainers(dir).map((c) => c.name) };
  } catch {
    /* no suggestion */
  }
  return err;
}

/** Header checks shared by every reader: the name inside matches the file name, the vault id matches. */
function checkHeader(h: ContainerHeader, name: string, vaultId: Buffer, path: string): void {
  if (h.name !== name)
    throw corrupt(path, `it holds container ${JSON.stringify(h.name)}; was the file renamed or swapped?`);
  if (!h.vaultId.equals(vaultId)) throw corrupt(path, 'it belongs to a different vault');
}

/** Reads and parses a whole container file, checking the name inside and the vault. */
function loadContainer(dir: string, name: ContainerName): { parsed: ParsedContainer; path: string } {
  const meta = loadMeta(dir);
  const path = vaultPaths(dir).container(name);
  const bytes = readBounded(path, MAX_FILE_BYTES, (size) =>
    corrupt(path, size < 0 ? 'it is not a regular file' : `${size} bytes is larger than any container can be`),
  );
  if (bytes === null) throw notFound(dir, name);
  const parsed = parseContainer(bytes, path, name);
  checkHeader(parsed.header, name, meta.vaultId, path);
  return { parsed, path };
}

/** Decrypts the body with `contentKey`; CONTENT_KEY_MISMATCH for a key of another container. */
function openBody(parsed: ParsedContainer, contentKey: Buffer, path: string): Entries {
  assertKey(contentKey, 'the content key');
  if (!constantTimeEqual(keyCommitment(contentKey, parsed.header.containerId), parsed.header.commitment)) {
    throw new VaultError(
      'CONTENT_KEY_MISMATCH',
      `the content key does not belong to ${path} (a stale cached key?); unwrap it again with the vault key`,
    );
  }
  const plain = open(parsed.body, parsed.headerBytes, parsed.header.bodyNonce, contentKey);
  if (plain === null) throw corrupt(path, 'the encrypted body failed authentication');
  try {
    return decodeBody(plain, path);
  } catch (err) {
    wipe(plain);
    throw err;
  }
}

/** Encrypts `entries` under `contentKey` with a fresh body nonce and writes the file atomically. */
function writeContainer(
  path: string,
  header: ContainerHeader,
  contentKey: Buffer,
  entries: ReadonlyMap<string, Uint8Array>,
): void {
  const h = { ...header, bodyNonce: randomBytes(NONCE_BYTES) };
  const headerBytes = encodeHeader(h);
  const plain = encodeBody(entries);
  try {
    atomicWrite(path, [headerBytes, sealWithNonce(plain, headerBytes, h.bodyNonce, contentKey)]);
  } finally {
    wipe(plain);
  }
}

/**
 * Creates an empty container with a new random id and content key. The vault
 * key is checked first, so a wrong key can never produce a container nobody
 * can open. CONTAINER_EXISTS when the name is taken.
 */
export function createContainer(dir: string, vaultKey: Buffer, name: string): ContainerInfo & { entries: number } {
  validateContainerName(name);
  const meta = requireVaultKey(dir, vaultKey);
  const paths = vaultPaths(dir);
  const path = paths.container(name);
  ensureDir(paths.containers);
  return withVaultLock(dir, () => {
    if (existsSync(path) || existsSync(recordPath(dir, name)))
      throw new VaultError('CONTAINER_EXISTS', `a container named ${JSON.stringify(name)} already exists`);
    const contentKey = secureRandom(KEY_BYTES);
    try {
      const partial = { version: CONTAINER_VERSION, vaultId: meta.vaultId, containerId: randomBytes(16), name };
      const wrapNonce = randomBytes(NONCE_BYTES);
      const header: ContainerHeader = {
        ...partial,
        wrapNonce,
        wrappedKey: sealWithNonce(contentKey, wrapAd(partial), wrapNonce, vaultKey),
        commitment: keyCommitment(contentKey, partial.containerId),
        bodyNonce: Buffer.alloc(NONCE_BYTES),
      };
      writeContainer(path, header, contentKey, new Map());
      return { name, id: partial.containerId.toString('hex'), path, shared: false, link: null, entries: 0 };
    } finally {
      wipe(contentKey);
    }
  });
}

/**
 * Every container, sorted by name, from headers alone (no key needed): the
 * files in containers/ (private and shared) and the linked shared files. A
 * file whose header is damaged is still listed, with `problem` set; temp
 * files of crashed writes and files whose names are not container names are
 * skipped.
 */
export function listContainers(dir: string): ContainerListing[] {
  const meta = loadMeta(dir);
  const paths = vaultPaths(dir);
  let names: string[];
  try {
    names = readdirSync(paths.containers);
  } catch {
    names = [];
  }
  const records = new Map(listRecords(dir).map((r) => [r.name, r]));
  const out: ContainerListing[] = [];
  const add = (name: ContainerName, path: string, link: string | null, expectedId: Buffer | null): void => {
    const base = { name, path, link, shared: link !== null, missing: false, recipients: null };
    let prefix: ReturnType<typeof readPrefix>;
    try {
      prefix = readPrefix(path, HEADER_PREFIX_BYTES, (why) => corrupt(path, why));
    } catch (err) {
      if (!(err instanceof VaultError)) throw err;
      out.push({ ...base, size: 0, modified: new Date(0), id: '', problem: err.message, members: null });
      return;
    }
    if (prefix === null && link !== null) {
      out.push({
        ...base,
        missing: true,
        size: 0,
        modified: new Date(0),
        id: expectedId?.toString('hex') ?? '',
        problem: missingLinkMessage(link),
        members: null,
      });
      return;
    }
    if (prefix === null) return; // removed while we listed
    const entry = { ...base, size: prefix.size, modified: prefix.mtime };
    try {
      const facts = headerFacts(prefix.bytes, name, meta.vaultId, path, expectedId);
      out.push({
        ...entry,
        id: facts.id,
        shared: facts.members !== null,
        problem: null,
        members: facts.members,
        recipients: facts.members === null ? null : facts.recipients,
      });
    } catch (err) {
      if (!(err instanceof VaultError)) throw err;
      out.push({ ...entry, id: '', problem: err.message, members: null });
    }
  };
  for (const file of names) {
    if (isTempName(file) || !file.endsWith(CONTAINER_EXT)) continue;
    const name = containerNameOrNull(file.slice(0, -CONTAINER_EXT.length));
    if (name === null) continue;
    add(name, paths.container(name), null, records.get(name)?.record?.containerId ?? null);
  }
  for (const [name, r] of records) {
    if (r.record?.link) add(name, r.record.link, r.record.link, r.record.containerId);
    else if (r.problem)
      out.push({
        name,
        path: recordPath(dir, name),
        link: null,
        shared: true,
        missing: false,
        recipients: null,
        size: 0,
        modified: new Date(0),
        id: '',
        problem: r.problem,
        members: null,
      });
  }
  return out.sort((a, b) => byCodeUnits(a.name, b.name));
}

/** Name, id, path and kind from the header alone; CONTAINER_NOT_FOUND or CONTAINER_CORRUPT. */
export function containerInfo(dir: string, ref: ContainerRef): ContainerInfo & { size: number; modified: Date } {
  const name = refName(ref);
  const meta = loadMeta(dir);
  const record = readRecord(dir, { name });
  const path = record?.link ?? vaultPaths(dir).container(name);
  const prefix = readPrefix(path, HEADER_PREFIX_BYTES, (why) => corrupt(path, why));
  if (prefix === null) {
    if (record?.link)
      throw new VaultError('CONTAINER_NOT_FOUND', `container ${name} is ${missingLinkMessage(record.link)}`);
    throw notFound(dir, name);
  }
  const facts = headerFacts(prefix.bytes, name, meta.vaultId, path, record?.containerId ?? null);
  return {
    name,
    id: facts.id,
    path,
    shared: facts.members !== null,
    link: record?.link ?? null,
    size: prefix.size,
    modified: prefix.mtime,
  };
}

/**
 * Deletes a container file, and what the vault remembers of it when it is
 * shared. A linked container is only unlinked: the file it names is kept.
 * CONTAINER_NOT_FOUND when there is none.
 */
export function removeContainer(dir: string, name: string): void {
  validateContainerName(name);
  loadMeta(dir);
  const path = vaultPaths(dir).container(name);
  withVaultLock(dir, () => {
    let record: ReturnType<typeof readRecord> = null;
    try {
      record = readRecord(dir, name);
    } catch {
      /* a damaged record is removed all the same */
    }
    const removedFile = record?.link ? false : removeFile(path);
    if (!removeRecord(dir, name) && !removedFile) throw notFound(dir, name);
  });
}

/**
 * The container's content key, unwrapped with the vault key into a secure
 * buffer (release with wipe()). The vault key is checked against vault.json
 * first, so a failure after that is CONTAINER_CORRUPT, never a guess.
 */
export function unwrapContentKey(dir: string, vaultKey: Buffer, ref: ContainerRef): Buffer {
  const name = refName(ref);
  requireVaultKey(dir, vaultKey);
  const { parsed, path } = loadContainer(dir, name);
  const h = parsed.header;
  const key = open(h.wrappedKey, wrapAd(h), h.wrapNonce, vaultKey);
  if (key === null) throw corrupt(path, 'the wrapped content key failed authentication');
  if (!constantTimeEqual(keyCommitment(key, h.containerId), h.commitment)) {
    wipe(key);
    throw corrupt(path, 'the content key does not match its commitment');
  }
  return key;
}

/**
 * Decrypts every entry. Values are views into one secure buffer: release them
 * all with wipeEntries(). CONTENT_KEY_MISMATCH for a key of another container,
 * CONTAINER_CORRUPT for any changed or missing byte.
 */
export function readEntries(dir: string, ref: ContainerRef, contentKey: Buffer): Entries {
  const { parsed, path } = loadContainer(dir, refName(ref));
  return openBody(parsed, contentKey, path);
}

/** One stored value (an entry's, or PATH#FIELD) as a secure copy (release with wipe()); ENTRY_NOT_FOUND when absent. */
export function readEntry(dir: string, ref: ContainerRef, contentKey: Buffer, entryName: string): Buffer {
  validateStoredKey(entryName);
  const name = refName(ref);
  const entries = readEntries(dir, { name }, contentKey);
  try {
    const value = entries.get(entryName);
    if (value === undefined) throw entryNotFound(name, entryName, entries.keys());
    return secureCopy(value);
  } finally {
    wipeEntries(entries);
  }
}

/**
 * ENTRY_NOT_FOUND for stored key `key` (an entry path, or PATH#FIELD), with the
 * container's entry paths (or the entry's fields) to suggest from: the
 * container is open, so its names are known.
 */
export function entryNotFound(container: string, key: string, keys: Iterable<string>): VaultError {
  const all = [...keys];
  const { path, field } = splitKey(key);
  if (field !== null && all.includes(path)) {
    const fields = fieldsOf(all, path);
    const err = new VaultError(
      'ENTRY_NOT_FOUND',
      `entry ${path} of container ${JSON.stringify(container)} has no field ${field}${fields.length > 0 ? ` (its fields: ${fields.join(', ')})` : ' (it has no fields)'}`,
    );
    err.misspelt = { word: field, candidates: fields };
    return err;
  }
  const err = new VaultError('ENTRY_NOT_FOUND', `container ${JSON.stringify(container)} has no entry ${path}`);
  err.misspelt = { word: path, candidates: entryPaths(all) };
  return err;
}

/**
 * Applies several changes in one atomic rewrite: a Buffer sets an entry, null
 * deletes it; the values they replace go into the entries' history, kept as
 * `policy` says (entry-history.ts). Returns the names that actually changed.
 * Nothing is written when nothing changes, or when any change is invalid or
 * over a limit.
 */
export function updateEntries(
  dir: string,
  ref: ContainerRef,
  contentKey: Buffer,
  changes: ReadonlyMap<string, Buffer | null>,
  policy: HistoryPolicy = DEFAULT_POLICY,
): string[] {
  checkPolicy(policy);
  for (const [entryName, value] of changes) {
    validateStoredKey(entryName);
    if (value !== null) validateValue(value, entryName);
  }
  assertKey(contentKey, 'the content key');
  const name = refName(ref);
  loadMeta(dir); // VAULT_NOT_FOUND here, rather than a failure to create the lock file
  return withVaultLock(dir, () => {
    const { parsed, path } = loadContainer(dir, name);
    const entries = openBody(parsed, contentKey, path);
    try {
      const { next, changed } = applyChanges(entries, changes, policy);
      if (changed.length > 0) writeContainer(path, parsed.header, contentKey, next);
      return changed;
    } finally {
      wipeEntries(entries);
    }
  });
}

/** Sets one entry (creating or replacing it). */
export function writeEntry(dir: string, ref: ContainerRef, contentKey: Buffer, entryName: string, value: Buffer): void {
  updateEntries(dir, ref, contentKey, new Map([[entryName, value]]));
}

/** Deletes one entry (its value kept in its history); false when it did not exist (nothing is written then). */
export function deleteEntry(dir: string, ref: ContainerRef, contentKey: Buffer, entryName: string): boolean {
  return updateEntries(dir, ref, contentKey, new Map([[entryName, null]])).length > 0;
}

/**
 * Renames a private container. Its name is bound into the header (the key
 * wrap's AD, and so the body's), so the file is written anew under NEW with
 * the same id and content key (cached keys stay valid; change times kept),
 * then OLD is removed, under the vault lock. A crash between the two leaves
 * both names opening the same entries, never neither. CONTAINER_EXISTS when
 * NEW is taken; a shared container is renamed by sharing/rename.ts instead.
 */
export function renameContainer(dir: string, vaultKey: Buffer, fromText: string, to: string): ContainerInfo {
  const from = parseContainerName(fromText);
  validateContainerName(to);
  const contentKey = unwrapContentKey(dir, vaultKey, { name: from });
  try {
    return withVaultLock(dir, () => {
      const newPath = vaultPaths(dir).container(to);
      if (existsSync(newPath) || existsSync(recordPath(dir, to)))
        throw new VaultError('CONTAINER_EXISTS', `a container named ${JSON.stringify(to)} already exists`);
      const { parsed, path } = loadContainer(dir, from);
      const entries = openBody(parsed, contentKey, path);
      try {
        const h = parsed.header;
        const partial = { version: h.version, vaultId: h.vaultId, containerId: h.containerId, name: to };
        const wrapNonce = randomBytes(NONCE_BYTES);
        const header: ContainerHeader = {
          ...h,
          name: to,
          wrapNonce,
          wrappedKey: sealWithNonce(contentKey, wrapAd(partial), wrapNonce, vaultKey),
        };
        writeContainer(newPath, header, contentKey, entries);
      } finally {
        wipeEntries(entries);
      }
      removeFile(path);
      return { name: to, id: parsed.header.containerId.toString('hex'), path: newPath, shared: false, link: null };
    });
  } finally {
    wipe(contentKey);
  }
}
