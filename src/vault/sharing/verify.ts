/**
 * Loading a shared container file and deciding whether to trust it, in the
 * order docs/container-format.md gives:
 *
 *   1. structure (CONTAINER_CORRUPT);
 *   2. the recipient list: signed by its owner, and the owner is the one this
 *      vault pinned (SHARE_MEMBERSHIP_INVALID);
 *   3. the write: the writer's signature over every byte (SHARE_BAD_SIGNATURE),
 *      by a member of that list (SHARE_SIGNER_NOT_MEMBER), numbered with room
 *      for later versions (numbering.ts);
 *   4. history against the last revision this vault saw (a jump too far,
 *      SHARE_ROLLBACK, SHARE_DIVERGED);
 *   5. this vault's identity is a recipient (SHARE_NOT_RECIPIENT).
 *
 * Only then is the revision remembered and a content key used. Nothing here
 * needs a secret key.
 */
import { VaultError } from '../errors.js';
import { fingerprintOf, formatFingerprint } from '../fingerprint.js';
import { readBounded } from '../fs-atomic.js';
import { withVaultLock } from '../lock.js';
import { loadMeta } from '../meta-file.js';
import { type ContainerName, type ContainerRef, refName } from '../names.js';
import { vaultPaths } from '../paths.js';
import { publicKeysProblem } from '../public-key.js';
import { verifyMembership, verifyWrite } from './crypto.js';
import { containerVersion, decodeShared, MAX_SHARED_FILE_BYTES, stanzaIndex, type SharedFile } from './format.js';
import { covers, historyError, relate, seenOf, shortKey, type Relation } from './history.js';
import { checkJump, checkNumbering, type NumberingError } from './numbering.js';
import { ownCopyPath, readRecord, writeRecord, type SeenRevision, type SharedRecord } from './records.js';

export interface PublicIdentity {
  x25519: Buffer;
  ed25519: Buffer;
}

/** A shared container file as read from disk, with what this vault remembers of it. */
export interface LoadedShared {
  name: string;
  path: string;
  bytes: Buffer;
  file: SharedFile;
  record: SharedRecord | null;
  /** The file's revision in the form the record keeps. */
  next: SeenRevision;
}

function corrupt(path: string, why: string): VaultError {
  return new VaultError('CONTAINER_CORRUPT', `${path} is damaged or was modified: ${why}`);
}

/** Reads and decodes a shared container file at `path` (CONTAINER_NOT_FOUND when missing). */
export function readSharedFile(path: string, missing: () => VaultError): { bytes: Buffer; file: SharedFile } {
  const bytes = readBounded(path, MAX_SHARED_FILE_BYTES, (size) =>
    corrupt(path, size < 0 ? 'it is not a regular file' : `${size} bytes is larger than any container can be`),
  );
  if (bytes === null) throw missing();
  const version = containerVersion(bytes);
  if (version === null) throw corrupt(path, 'it is not a stash container file');
  if (version === 1) {
    throw new VaultError(
      'SHARE_NOT_SHARED',
      `${path} is a private container of one vault and cannot be opened elsewhere; its owner shares it first (stash container share NAME CONTACT), then exports that`,
    );
  }
  return { bytes, file: decodeShared(bytes, path) };
}

/** The file of shared container `ref` in vault `dir` (the vault copy or the linked file) and its record. */
export function loadShared(dir: string, ref: ContainerRef): LoadedShared {
  const name = refName(ref);
  loadMeta(dir);
  const record = readRecord(dir, name);
  const path = record?.link ?? vaultPaths(dir).container(name);
  const bytes = readBounded(path, MAX_SHARED_FILE_BYTES, (size) =>
    corrupt(path, size < 0 ? 'it is not a regular file' : `${size} bytes is larger than any container can be`),
  );
  if (bytes === null) {
    throw new VaultError(
      'CONTAINER_NOT_FOUND',
      record?.link
        ? `container ${name} is linked to ${record.link}, which does not exist (moved, or not pulled yet?)`
        : `no container named ${JSON.stringify(name)} in the vault at ${dir}`,
    );
  }
  if (!record && containerVersion(bytes) === 1) {
    throw new VaultError(
      'SHARE_NOT_SHARED',
      `container ${name} is private to this vault; share it first: stash container share ${name} CONTACT`,
    );
  }
  const file = decodeShared(bytes, path);
  if (record && !record.containerId.equals(file.membership.containerId)) {
    throw corrupt(
      path,
      `it holds another container than ${name} (id ${file.membership.containerId.toString('hex')}, expected ${record.containerId.toString('hex')}); was the file swapped?`,
    );
  }
  return { name, path, bytes, file, record, next: seenOf(file, bytes) };
}

/**
 * Steps 2 and 3: signatures, owner, writer, numbering. `pinnedOwner` is the
 * owner this vault accepted, if any; `name` names the container in messages.
 * `numbering: false` skips the numbering checks, for the owner's unshare of
 * the member whose numbering was refused (numbering.ts).
 */
export function verifySignatures(
  file: SharedFile,
  path: string,
  pinnedOwner: PublicIdentity | null,
  name: string,
  opts: { numbering?: boolean } = {},
): void {
  const m = file.membership;
  for (const s of m.stanzas) {
    const problem = publicKeysProblem(s);
    if (problem) throw corrupt(path, `a recipient's key is unusable (${problem})`);
  }
  const owner = m.stanzas[0]!;
  if (pinnedOwner && !(pinnedOwner.ed25519.equals(owner.ed25519) && pinnedOwner.x25519.equals(owner.x25519))) {
    throw new VaultError(
      'SHARE_MEMBERSHIP_INVALID',
      `${path} names another owner (${formatFingerprint(fingerprintOf(owner.x25519, owner.ed25519))}) than the one this vault accepted ` +
        `(${formatFingerprint(fingerprintOf(pinnedOwner.x25519, pinnedOwner.ed25519))}); it was refused. If the owner rotated their identity, ` +
        'accept their rotation statement first: stash vault contact accept-rotation FILE',
    );
  }
  if (!verifyMembership(file.membershipBytes, file.ownerSignature, owner.ed25519)) {
    throw new VaultError(
      'SHARE_MEMBERSHIP_INVALID',
      `${path} was refused: its recipient list is not signed by its owner (the list or a sealed key was changed without the owner's signature)`,
    );
  }
  if (!verifyWrite(file.signedBytes, file.writerSignature, file.write.writer)) {
    throw new VaultError(
      'SHARE_BAD_SIGNATURE',
      `${path} was refused: it was changed after it was written (the writer's signature does not match: truncated, damaged or tampered with)`,
    );
  }
  const w = stanzaIndex(m, file.write.writer);
  if (w < 0) {
    throw new VaultError(
      'SHARE_SIGNER_NOT_MEMBER',
      `${path} was refused: version ${file.write.revision} is signed by ${shortKey(file.write.writer.toString('hex'))}, who is not one of its recipients`,
    );
  }
  if (file.write.lastWrites[w] !== file.write.revision)
    throw corrupt(path, "the writer's last-write revision is not this revision");
  if (opts.numbering !== false) checkNumbering(file, path, name);
}

/** A name for a member key in messages: "you", "the owner", else its fingerprint. */
export function memberNamer(file: SharedFile, me: PublicIdentity | null): (ed25519Hex: string) => string {
  return (hex) => {
    if (me && me.ed25519.toString('hex') === hex) return 'you';
    const s = file.membership.stanzas.find((x) => x.ed25519.toString('hex') === hex);
    const fp = shortKey(hex, s?.x25519);
    return s === file.membership.stanzas[0] ? `the owner (${fp})` : fp;
  };
}

/**
 * For a refusal: where this vault's own last version is, when the file lacks
 * it (something replaced the linked file after our write), so it can be merged back.
 */
function ownCopyHint(dir: string, l: LoadedShared): string {
  const copy = ownCopyPath(dir, l.name);
  try {
    const bytes = readBounded(copy, MAX_SHARED_FILE_BYTES, () => corrupt(copy, 'not a container file'));
    if (bytes === null) return '';
    const mine = seenOf(decodeShared(bytes, copy), bytes);
    if (covers(l.next, mine)) return '';
    return ` Your own last version (${mine.revision}), which this file lacks, is kept in ${copy}: stash container merge ${l.name} ${copy} brings it back.`;
  } catch {
    return ''; // a hint only: a damaged copy must not hide the refusal
  }
}

/** Step 4: how the file relates to the last revision seen; throws for rollback and divergence. */
export function checkHistory(l: LoadedShared, me: PublicIdentity | null, dir?: string): Relation | 'new' {
  if (!l.record) return 'new';
  checkJump(l.record.seen, l.file, l.path, l.name);
  const relation = relate(l.record.seen, l.next);
  const err = historyError(relation, l.record.seen, l.next, l.path, l.name, memberNamer(l.file, me));
  if (err) throw dir === undefined ? err : new VaultError(err.code, `${err.message}${ownCopyHint(dir, l)}`);
  return relation;
}

/** Step 5: this identity's stanza index; SHARE_NOT_RECIPIENT when it has none. */
export function recipientIndex(l: { file: SharedFile; path: string; name: string }, me: PublicIdentity): number {
  const i = stanzaIndex(l.file.membership, me.ed25519);
  if (i < 0 || !l.file.membership.stanzas[i]!.x25519.equals(me.x25519)) {
    throw new VaultError(
      'SHARE_NOT_RECIPIENT',
      `you are not a recipient of ${l.path} (version ${l.file.write.revision}): the owner has not shared it with you, or removed you. ` +
        'Copies of earlier versions you hold still open with your key.',
    );
  }
  return i;
}

/**
 * Remembers `l` as the last revision seen, under the vault lock, unless
 * another process of this vault has meanwhile recorded a later one. Then `l`
 * was read before that process's write, so it is judged against the record
 * now only when `final`; otherwise false: read the file again.
 */
export function rememberSeen(
  dir: string,
  l: LoadedShared,
  me: PublicIdentity | null,
  base: SharedRecord,
  final = true,
): boolean {
  return withVaultLock(dir, () => {
    const current = readRecord(dir, l.name) ?? base;
    if (!current.containerId.equals(l.file.membership.containerId)) return true; // replaced meanwhile; the next read sees it
    const relation = relate(current.seen, l.next);
    const moved = !current.seen.hash.equals(base.seen.hash);
    // Not a rollback: our read was older than a write this vault made since (two `stash set` at once).
    if (moved && !final && relation !== 'same' && relation !== 'newer') return false;
    checkJump(current.seen, l.file, l.path, l.name);
    const err = historyError(relation, current.seen, l.next, l.path, l.name, memberNamer(l.file, me));
    if (err) throw err;
    if (relation === 'newer') writeRecord(dir, { ...current, seen: l.next });
    return true;
  });
}

/** Reads of a file that this vault's own writers keep moving past, before the last judgement stands. */
const MAX_REREADS = 20;

/**
 * Steps 1-4 for a container of this vault, and the record kept up to date.
 * A file with no record is accepted only when this vault's identity owns it
 * (a `share` interrupted between its two writes); anything else must be
 * imported, linked or accepted first.
 */
export function loadVerified(
  dir: string,
  ref: ContainerRef,
  me: PublicIdentity,
): LoadedShared & { record: SharedRecord } {
  const name = refName(ref);
  for (let read = 1; ; read++) {
    const l = verifiedOnce(dir, name, me, read >= MAX_REREADS);
    if (l) return l;
  }
}

/** One read for loadVerified; null when another process of this vault wrote meanwhile and it must read again. */
function verifiedOnce(
  dir: string,
  name: ContainerName,
  me: PublicIdentity,
  final: boolean,
): (LoadedShared & { record: SharedRecord }) | null {
  const l = loadShared(dir, { name });
  verifySignatures(l.file, l.path, l.record?.owner ?? null, name);
  const relation = checkHistory(l, me, dir);
  // Before anything is remembered: a revision this vault cannot read does not
  // advance its history, so a removed member's earlier copies keep opening.
  recipientIndex(l, me);
  const owner = l.file.membership.stanzas[0]!;
  if (relation === 'new') {
    if (!owner.ed25519.equals(me.ed25519)) {
      throw new VaultError(
        'SHARE_UNTRUSTED_OWNER',
        `this vault has no record of shared container ${name} (${vaultPaths(dir).dir}/shared/${name}.json is missing); check the file, then run: stash container accept ${name}`,
      );
    }
    const record: SharedRecord = {
      name,
      containerId: l.file.membership.containerId,
      owner: { x25519: owner.x25519, ed25519: owner.ed25519 },
      link: null,
      seen: l.next,
    };
    withVaultLock(dir, () => {
      if (!readRecord(dir, { name })) writeRecord(dir, record);
    });
    return { ...l, record };
  }
  if (relation === 'newer' && !rememberSeen(dir, l, me, l.record!, final)) return null;
  return l as LoadedShared & { record: SharedRecord };
}

/**
 * The file of `name` that `refused` turned down for its numbering, for the
 * owner's unshare of its writer: every check but numbering, and of history
 * only the recipient list (an older list than this vault saw stays a rollback).
 */
export function loadRefusedNumbering(
  dir: string,
  name: string,
  me: PublicIdentity,
  refused: NumberingError,
): LoadedShared & { record: SharedRecord } {
  const l = loadShared(dir, name);
  if (!l.record) throw refused; // no version seen before it to number the next one from
  verifySignatures(l.file, l.path, l.record.owner, name, { numbering: false });
  if (!l.file.write.writer.equals(refused.writer.ed25519)) {
    throw new VaultError(
      'SHARE_CHANGED',
      `${l.path} changed while it was being read (another member or program wrote it); nothing was written: run the command again`,
    );
  }
  if (l.next.epoch < l.record.seen.epoch)
    throw historyError('rollback', l.record.seen, l.next, l.path, name, memberNamer(l.file, me))!;
  recipientIndex(l, me);
  return l as LoadedShared & { record: SharedRecord };
}
