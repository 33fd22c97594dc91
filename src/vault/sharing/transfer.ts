/**
 * Moving shared container files between vaults and places: export a copy,
 * import one into the vault, link one that lives elsewhere (a git checkout, a
 * shared folder) so that get/set/env use it where it is, and accept a file
 * that history checks refused, after a person has looked at it.
 *
 * A file is taken into a vault only when this vault's identity is one of its
 * recipients and its owner is this vault or one of its contacts (keys checked
 * by fingerprint), so the trust in a shared container comes from the contact
 * list. The owner is then pinned in the vault's record.
 */
import { existsSync } from 'node:fs';
import { basename, resolve } from 'node:path';
import { wipeEntries } from '../container-body.js';
import { listContacts } from '../contacts.js';
import { VaultError } from '../errors.js';
import { fingerprintOf, formatFingerprint } from '../fingerprint.js';
import { removeFile } from '../fs-atomic.js';
import { identityPublic, identitySecret } from '../identity.js';
import { withVaultLock } from '../lock.js';
import { requireVaultKey } from '../meta-file.js';
import { validateContainerName } from '../names.js';
import { vaultPaths } from '../paths.js';
import { wipe } from '../secure.js';
import { checkOutputPath } from '../user-file.js';
import { fileHash } from './crypto.js';
import { describeRevision, historyError, relate, seenOf, type Relation } from './history.js';
import { checkJump } from './numbering.js';
import { listRecords, readRecord, writeRecord, type SeenRevision, type SharedRecord } from './records.js';
import { writeIfUnchanged } from './revisions.js';
import { openSharedBody, openStanza } from './shared-entries.js';
import {
  loadShared,
  loadVerified,
  memberNamer,
  readSharedFile,
  verifySignatures,
  type LoadedShared,
  type PublicIdentity,
} from './verify.js';

export interface TransferResult {
  name: string;
  path: string;
  revision: number;
  /** What changed: a new copy or link, an update of one, or nothing (already up to date). */
  outcome: 'added' | 'updated' | 'unchanged' | 'replaced-copy';
  /** The revision this vault had seen before, when it had one. */
  previous: SeenRevision | null;
}

const fp = (k: PublicIdentity) => formatFingerprint(fingerprintOf(k.x25519, k.ed25519));

/** The default local name of a container file: its base name without `.stash`. */
function defaultName(path: string): string {
  const base = basename(path);
  return base.endsWith('.stash') ? base.slice(0, -'.stash'.length) : base;
}

/**
 * Everything but history for a file arriving from outside: signatures, this
 * vault is a recipient, the owner is trusted, and the body opens with the key
 * sealed to this vault (so a file accepted is a file that can be read).
 */
function checkArrival(
  dir: string,
  vaultKey: Buffer,
  l: Omit<LoadedShared, 'record'> & { record: SharedRecord | null },
): PublicIdentity {
  requireVaultKey(dir, vaultKey);
  const pub = identityPublic(dir, vaultKey);
  const me = { x25519: pub.x25519, ed25519: pub.ed25519 };
  verifySignatures(l.file, l.path, l.record?.owner ?? null, l.name);
  const secret = identitySecret(dir, vaultKey);
  try {
    const key = openStanza(l as LoadedShared, me, secret.x25519); // SHARE_NOT_RECIPIENT first: Carol learns nothing more
    try {
      wipeEntries(openSharedBody(l as LoadedShared, key));
    } finally {
      wipe(key);
    }
  } finally {
    wipe(secret.x25519);
    wipe(secret.ed25519);
  }
  const owner = l.file.membership.stanzas[0]!;
  const trusted =
    owner.ed25519.equals(me.ed25519) ||
    listContacts(dir, vaultKey).some((c) => c.ed25519.equals(owner.ed25519) && c.x25519.equals(owner.x25519));
  if (!trusted) {
    throw new VaultError(
      'SHARE_UNTRUSTED_OWNER',
      `${l.path} is owned by ${fp(owner)}, who is neither you nor one of your contacts; add the owner first (stash vault contact receive CODE, checking the fingerprint), then try again`,
    );
  }
  return me;
}

/** A record for `name` of a file just checked, with no history of its own yet. */
function freshRecord(
  name: string,
  l: { file: LoadedShared['file']; next: SeenRevision },
  link: string | null,
): SharedRecord {
  const o = l.file.membership.stanzas[0]!;
  return {
    name,
    containerId: l.file.membership.containerId,
    owner: { x25519: o.x25519, ed25519: o.ed25519 },
    link,
    seen: l.next,
  };
}

/** Refuses a container id that this vault already holds under another name. */
function refuseDuplicateId(dir: string, name: string, containerId: Buffer): void {
  for (const r of listRecords(dir)) {
    if (r.record && r.name !== name && r.record.containerId.equals(containerId)) {
      throw new VaultError(
        'CONTAINER_EXISTS',
        `this vault already holds that container as ${r.name}; use that name (stash container rm ${r.name} first to use another)`,
      );
    }
  }
}

/** Judges an arriving file against the record of the same container; throws for rollback and divergence. */
function judge(
  l: { file: LoadedShared['file']; next: SeenRevision; path: string },
  record: SharedRecord,
  name: string,
  me: PublicIdentity,
): Relation {
  checkJump(record.seen, l.file, l.path, name);
  const relation = relate(record.seen, l.next);
  const err = historyError(relation, record.seen, l.next, l.path, name, memberNamer(l.file, me));
  if (err) throw err;
  return relation;
}

/**
 * Copies the shared container file at `file` into the vault as `name`
 * (default: the file name without .stash). Importing a later revision of a
 * container already imported under that name updates the copy; an older or
 * diverged one is refused.
 */
export function importShared(dir: string, vaultKey: Buffer, file: string, name = defaultName(file)): TransferResult {
  validateContainerName(name);
  const source = resolve(file);
  const { bytes, file: parsed } = readSharedFile(
    source,
    () => new VaultError('FILE_NOT_FOUND', `${source} does not exist`),
  );
  return withVaultLock(dir, () => {
    const record = readRecord(dir, name);
    const l = { name, path: source, bytes, file: parsed, record, next: seenOf(parsed, bytes) };
    if (record && !record.containerId.equals(parsed.membership.containerId))
      throw new VaultError('CONTAINER_EXISTS', `a different container named ${name} already exists`);
    if (record?.link)
      throw new VaultError(
        'CONTAINER_EXISTS',
        `${name} is linked to ${record.link}; it is updated where it is (git pull), not imported`,
      );
    const me = checkArrival(dir, vaultKey, l);
    const target = vaultPaths(dir).container(name);
    if (!record) {
      if (existsSync(target))
        throw new VaultError(
          'CONTAINER_EXISTS',
          `a container named ${JSON.stringify(name)} already exists; choose another with --name`,
        );
      refuseDuplicateId(dir, name, parsed.membership.containerId);
      writeIfUnchanged(target, bytes, null);
      writeRecord(dir, freshRecord(name, l, null));
      return { name, path: target, revision: l.next.revision, outcome: 'added', previous: null };
    }
    const relation = judge(l, record, name, me);
    if (relation === 'same')
      return { name, path: target, revision: l.next.revision, outcome: 'unchanged', previous: record.seen };
    const current = loadShared(dir, name);
    writeIfUnchanged(target, bytes, fileHash(current.bytes));
    writeRecord(dir, { ...record, seen: l.next });
    return { name, path: target, revision: l.next.revision, outcome: 'updated', previous: record.seen };
  });
}

/**
 * Uses the shared container file at `path` in place as `name`: get, set and
 * env read and write that file. When the vault holds a copy of the same
 * container under that name and the file is the same revision or a later
 * one, the copy is removed and the link takes its place.
 */
export function linkShared(dir: string, vaultKey: Buffer, path: string, name = defaultName(path)): TransferResult {
  validateContainerName(name);
  const target = resolve(path);
  const { bytes, file: parsed } = readSharedFile(
    target,
    () => new VaultError('FILE_NOT_FOUND', `${target} does not exist`),
  );
  return withVaultLock(dir, () => {
    const record = readRecord(dir, name);
    const l = { name, path: target, bytes, file: parsed, record, next: seenOf(parsed, bytes) };
    if (record && !record.containerId.equals(parsed.membership.containerId))
      throw new VaultError('CONTAINER_EXISTS', `a different container named ${name} already exists`);
    const me = checkArrival(dir, vaultKey, l);
    if (!record) {
      if (existsSync(vaultPaths(dir).container(name)))
        throw new VaultError(
          'CONTAINER_EXISTS',
          `a container named ${JSON.stringify(name)} already exists; choose another with --name`,
        );
      refuseDuplicateId(dir, name, parsed.membership.containerId);
      writeRecord(dir, freshRecord(name, l, target));
      return { name, path: target, revision: l.next.revision, outcome: 'added', previous: null };
    }
    let relation: Relation;
    try {
      relation = judge(l, record, name, me);
    } catch (err) {
      if (record.link === null && (err as VaultError).code === 'SHARE_ROLLBACK') {
        throw new VaultError(
          'SHARE_ROLLBACK',
          `the copy of ${name} in this vault (version ${record.seen.revision}) is newer than ${target} (version ${l.next.revision}); write it there first: stash container export ${name} ${target}`,
        );
      }
      throw err;
    }
    if (record.link === target && relation === 'same')
      return { name, path: target, revision: l.next.revision, outcome: 'unchanged', previous: record.seen };
    // The copy goes first: a crash in between leaves a record without its file, which linking again repairs.
    if (record.link === null) removeFile(vaultPaths(dir).container(name));
    writeRecord(dir, { ...record, link: target, seen: l.next });
    if (record.link === null)
      return { name, path: target, revision: l.next.revision, outcome: 'replaced-copy', previous: record.seen };
    return { name, path: target, revision: l.next.revision, outcome: 'updated', previous: record.seen };
  });
}

/**
 * Writes the current revision of shared container `name` to `file`. An
 * existing file must be an earlier revision of the same container (it is
 * then brought up to date); a later, diverged or foreign file is refused.
 */
export function exportShared(dir: string, name: string, file: string): TransferResult {
  const target = resolve(file);
  const me = identityPublic(dir);
  const l = loadVerified(dir, name, me);
  if (target === l.path) return { name, path: target, revision: l.next.revision, outcome: 'unchanged', previous: null };
  checkOutputPath(target); // a device, FIFO, socket, folder or link there is refused before it is read
  let existing: { bytes: Buffer; file: LoadedShared['file'] } | null = null;
  try {
    existing = readSharedFile(target, () => new VaultError('FILE_NOT_FOUND', `${target} does not exist`));
  } catch (err) {
    const code = (err as VaultError).code;
    if (code === 'CONTAINER_CORRUPT')
      throw new VaultError(
        'CONTAINER_EXISTS',
        `${target} exists and is not a copy of container ${name}; remove it or choose another file`,
      );
    if (code !== 'FILE_NOT_FOUND') throw err;
  }
  if (existing === null) {
    writeIfUnchanged(target, l.bytes, null, { shared: true, userNamed: true });
    return { name, path: target, revision: l.next.revision, outcome: 'added', previous: null };
  }
  if (!existing.file.membership.containerId.equals(l.file.membership.containerId)) {
    throw new VaultError('CONTAINER_EXISTS', `${target} holds another container; remove it or choose another file`);
  }
  verifySignatures(existing.file, target, l.record.owner, name);
  const theirs = seenOf(existing.file, existing.bytes);
  const relation = relate(l.next, theirs);
  if (relation === 'same')
    return { name, path: target, revision: l.next.revision, outcome: 'unchanged', previous: theirs };
  if (relation === 'newer') {
    throw new VaultError(
      'SHARE_DIVERGED',
      `${target} holds version ${theirs.revision}, newer than this vault's version ${l.next.revision} of ${name}; nothing was written. Take it in first (stash container import, or link it)`,
    );
  }
  if (relation === 'diverged') {
    throw new VaultError(
      'SHARE_DIVERGED',
      `${target} holds version ${theirs.revision} of ${name}, which has changes that this vault's version ${l.next.revision} lacks, and the other way round; nothing was written. ` +
        `Take its changes in first (read it with a separate name: stash container import ${target} --name ${name}-theirs, then stash get / stash set), then export again`,
    );
  }
  writeIfUnchanged(target, l.bytes, fileHash(existing.bytes), { shared: true, userNamed: true });
  return { name, path: target, revision: l.next.revision, outcome: 'updated', previous: theirs };
}

/**
 * Why `accept` never takes an older recipient list than the vault saw: the
 * list names members removed since, and the content key of that list is one
 * they hold, so everything written on it next (by this vault or anyone who
 * follows) would be readable by them again. The owner's current list has to
 * come back instead.
 */
function olderList(l: LoadedShared, seen: SeenRevision, me: PublicIdentity): VaultError {
  const nameOf = memberNamer(l.file, me);
  const removed = l.file.membership.stanzas
    .map((s) => s.ed25519.toString('hex'))
    .filter((k) => !seen.lastWrites.has(k));
  const who =
    removed.length > 0
      ? ` It names ${removed.map(nameOf).join(', ')}, removed since, who could read what is written on it next.`
      : '';
  return new VaultError(
    'SHARE_ROLLBACK',
    `${l.path} holds ${describeRevision(l.next, nameOf)} of ${l.name} on recipient list ${l.next.epoch}, older than list ${seen.epoch} that this vault already saw, so it cannot be accepted.${who} ` +
      `Get the current file back (for example git pull, or from the owner). If it is lost for good, the owner can start over from this one: copy it elsewhere, ` +
      `stash container rm ${l.name}, import or link the copy, then remove those members again with stash container unshare`,
  );
}

/**
 * Accepts the file of `name` as it is now, after a rollback or divergence
 * refusal that a person has looked into (or when the vault's record was
 * lost): every check but history runs, then the file becomes the last
 * revision seen. Returns what was seen before. An older recipient list than
 * the one seen is refused all the same (SHARE_ROLLBACK): see olderList().
 */
export function acceptShared(dir: string, vaultKey: Buffer, name: string): TransferResult {
  validateContainerName(name);
  return withVaultLock(dir, () => {
    const l = loadShared(dir, name);
    const me = checkArrival(dir, vaultKey, l);
    if (l.record && l.next.epoch < l.record.seen.epoch) throw olderList(l, l.record.seen, me);
    const previous = l.record?.seen ?? null;
    const relation = l.record ? relate(l.record.seen, l.next) : null;
    if (relation === 'same') return { name, path: l.path, revision: l.next.revision, outcome: 'unchanged', previous };
    writeRecord(dir, l.record ? { ...l.record, seen: l.next } : freshRecord(name, l, null));
    return { name, path: l.path, revision: l.next.revision, outcome: 'updated', previous };
  });
}
