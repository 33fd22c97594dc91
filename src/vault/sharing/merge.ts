/**
 * Merging two versions of a shared container that diverged (two members wrote
 * from the same base; a git conflict). The result is a new version that
 * contains both: every entry of either side, the newer recipient list, and
 * per member the later of their two last writes, so every member who saw
 * either side accepts it as a later version, without `accept`.
 *
 * There is no common ancestor to consult, so an entry that both sides hold
 * with different values is a conflict: refused, unless the caller says which
 * side wins. An entry deleted on one side and kept on the other is kept.
 */
import { resolve } from 'node:path';
import { NONCE_BYTES } from '../aead.js';
import {
  changeTime,
  historyOf,
  wipeEntries,
  withChangeTimesFrom,
  withHistory,
  type Entries,
} from '../container-body.js';
import { checkKeep, DEFAULT_HISTORY_KEEP, mergeHistories } from '../entry-history.js';
import type { PastValue } from '../history-block.js';
import { VaultError } from '../errors.js';
import { identityPublic, identitySecret } from '../identity.js';
import { withVaultLock } from '../lock.js';
import { requireVaultKey } from '../meta-file.js';
import { constantTimeEqual, randomBytes, wipe } from '../secure.js';
import { decodeShared, stanzaIndex, type SharedFile } from './format.js';
import { covers, historyError, relate, seenOf } from './history.js';
import { checkJump } from './numbering.js';
import type { SeenRevision, SharedRecord } from './records.js';
import { assembleFile, commitRevision, withWriteLock } from './revisions.js';
import { openSharedBody, openStanza } from './shared-entries.js';
import {
  loadShared,
  memberNamer,
  readSharedFile,
  recipientIndex,
  verifySignatures,
  type LoadedShared,
  type PublicIdentity,
} from './verify.js';

export interface MergeResult {
  outcome: 'merged' | 'fast-forward' | 'unchanged';
  /** The version now in the container's file. */
  revision: number;
  /** Entries taken from the other file (new there, or changed there and chosen). */
  fromOther: string[];
  /** Entries both sides changed, and which side won. */
  conflicts: string[];
  /**
   * Entries only one side holds, all kept. Without a common version a merge
   * cannot tell an entry added on one side from one deleted on the other,
   * so these are the ones a deletion may have been undone for.
   */
  oneSided: string[];
  /**
   * Removed entries whose previous values only one side holds, all kept: the
   * other side may have purged them (`rm --purge`), which the merge undid.
   */
  historyOneSided: string[];
}

/** Which side wins an entry that both versions hold with different values. */
export type Prefer = 'container' | 'file' | null;

function decrypt(l: LoadedShared, me: PublicIdentity, x25519Secret: Buffer): Entries {
  const key = openStanza(l, me, x25519Secret);
  try {
    return openSharedBody(l, key);
  } finally {
    wipe(key);
  }
}

/** The union of two entry maps, and the names both hold with different values. */
function unite(
  ours: Entries,
  theirs: Entries,
  prefer: Prefer,
): { merged: Map<string, Uint8Array>; fromOther: string[]; conflicts: string[]; oneSided: string[] } {
  const merged = new Map<string, Uint8Array>(ours);
  const fromOther: string[] = [];
  const conflicts: string[] = [];
  const oneSided = [...ours.keys()].filter((name) => !theirs.has(name));
  for (const [name, value] of theirs) {
    const mine = ours.get(name);
    if (mine === undefined) {
      merged.set(name, value);
      fromOther.push(name);
      oneSided.push(name);
    } else if (!constantTimeEqual(mine, value)) {
      conflicts.push(name);
      if (prefer === 'file') {
        merged.set(name, value);
        fromOther.push(name);
      }
    }
  }
  return { merged, fromOther, conflicts, oneSided: oneSided.sort() };
}

/** Names with no current value after the merge whose history only one side holds. */
function oneSidedHistory(ours: Entries, theirs: Entries, merged: ReadonlyMap<string, Uint8Array>): string[] {
  const [a, b] = [historyOf(ours), historyOf(theirs)];
  const names = [...a.keys()].filter((n) => !b.has(n)).concat([...b.keys()].filter((n) => !a.has(n)));
  return names.filter((n) => !merged.has(n)).sort();
}

/** The two versions of a merge, both checked, and what each step of it needs. */
interface Merging {
  dir: string;
  name: string;
  me: PublicIdentity;
  /** The version in the container's own file. */
  cur: LoadedShared;
  /** The version at the path given. */
  other: LoadedShared;
  record: SharedRecord;
  /** Throws unless `next` is a version this vault may accept after the one it saw last. */
  toSeen: (next: SeenRevision, what: string) => void;
}

/**
 * Merges the version at `otherPath` into container `name` of vault `dir`.
 * Both files must pass every check but history (signatures, the pinned owner,
 * this vault a recipient); the result must be a later version than the one
 * this vault saw last. When one file already contains the other, the later
 * one is simply kept.
 */
export function mergeShared(
  dir: string,
  vaultKey: Buffer,
  name: string,
  otherPath: string,
  prefer: Prefer = null,
  keep = DEFAULT_HISTORY_KEEP,
): MergeResult {
  checkKeep(keep);
  requireVaultKey(dir, vaultKey);
  const pub = identityPublic(dir, vaultKey);
  const me = { x25519: pub.x25519, ed25519: pub.ed25519 };
  return withVaultLock(dir, () =>
    withWriteLock(dir, name, () => {
      const m = loadBoth(dir, name, otherPath, me);
      const kept = keepLater(m);
      if (kept !== null) return kept;
      refuseRemovedWriter(m.cur, m.other, me);
      return withSecret(dir, vaultKey, (x25519Secret, ed25519Secret) =>
        mergeVersions(m, prefer, keep, x25519Secret, ed25519Secret),
      );
    }),
  );
}

/**
 * Loads the container's version and the one at `otherPath`, each past every
 * check but history: signatures, the pinned owner, this vault a recipient,
 * the same container, and no jump past what this vault saw.
 */
function loadBoth(dir: string, name: string, otherPath: string, me: PublicIdentity): Merging {
  const cur = loadShared(dir, name);
  const record = cur.record;
  if (!record)
    throw new VaultError(
      'SHARE_UNTRUSTED_OWNER',
      `this vault has no record of shared container ${name}; run: stash container accept ${name}`,
    );
  verifySignatures(cur.file, cur.path, record.owner, name);
  recipientIndex(cur, me);
  const path = resolve(otherPath);
  const { bytes, file } = readSharedFile(path, () => new VaultError('FILE_NOT_FOUND', `${path} does not exist`));
  const other: LoadedShared = { name, path, bytes, file, record, next: seenOf(file, bytes) };
  if (!file.membership.containerId.equals(cur.file.membership.containerId))
    throw new VaultError('CONTAINER_CORRUPT', `${path} holds another container than ${name}`);
  verifySignatures(file, path, record.owner, name);
  recipientIndex(other, me);
  // The merged version is numbered after the later side: neither may jump past what this vault saw.
  checkJump(record.seen, cur.file, cur.path, name);
  checkJump(record.seen, file, path, name);
  const nameOf = memberNamer(cur.file, me);
  const toSeen = (next: SeenRevision, what: string): void => {
    const err = historyError(relate(record.seen, next), record.seen, next, what, name, nameOf);
    if (err) throw err;
  };
  return { dir, name, me, cur, other, record, toSeen };
}

/** A result that took nothing from the other side. */
function nothingTaken(outcome: 'unchanged' | 'fast-forward', revision: number): MergeResult {
  return { outcome, revision, fromOther: [], conflicts: [], oneSided: [], historyOneSided: [] };
}

/**
 * When one version already contains the other, the later one is kept as it is
 * ('unchanged': the container's own; 'fast-forward': the other, committed); null
 * when neither does and the two must be merged.
 */
function keepLater(m: Merging): MergeResult | null {
  const { cur, other } = m;
  if (cur.next.hash.equals(other.next.hash) || (covers(cur.next, other.next) && cur.next.epoch >= other.next.epoch)) {
    m.toSeen(cur.next, cur.path); // the other adds nothing; the container's own file must still be acceptable
    return nothingTaken('unchanged', cur.next.revision);
  }
  if (covers(other.next, cur.next) && other.next.epoch >= cur.next.epoch) {
    m.toSeen(other.next, other.path);
    commitRevision(m.dir, cur.path, cur.bytes, other.bytes, m.record);
    return nothingTaken('fast-forward', other.next.revision);
  }
  return null;
}

/** Opens both versions, unites them, and commits the merged version; every opened entry is wiped after. */
function mergeVersions(
  m: Merging,
  prefer: Prefer,
  keep: number,
  x25519Secret: Buffer,
  ed25519Secret: Buffer,
): MergeResult {
  const { cur, other } = m;
  const ours = decrypt(cur, m.me, x25519Secret);
  let theirs: Entries | null = null;
  try {
    theirs = decrypt(other, m.me, x25519Secret);
    const { merged, ...taken } = uniteSides(ours, theirs, prefer, keep, m);
    const bytesOut = build(cur, other, merged, m.me, x25519Secret, ed25519Secret);
    const result = seenOf(decodeShared(bytesOut, cur.path), bytesOut);
    m.toSeen(result, 'the merged version');
    commitRevision(m.dir, cur.path, cur.bytes, bytesOut, m.record);
    return { outcome: 'merged', revision: result.revision, ...taken };
  } finally {
    wipeEntries(ours);
    if (theirs) wipeEntries(theirs);
  }
}

/**
 * Both sides' entries in one map, refused on a conflict unless `prefer` says
 * which side wins. Each entry keeps the change time of the side it was taken
 * from; the histories are united, and the value that lost a conflict joins them.
 */
function uniteSides(
  ours: Entries,
  theirs: Entries,
  prefer: Prefer,
  keep: number,
  m: Merging,
): Omit<MergeResult, 'outcome' | 'revision'> & { merged: Map<string, Uint8Array> } {
  const { merged, fromOther, conflicts, oneSided } = unite(ours, theirs, prefer);
  if (conflicts.length > 0 && prefer === null) {
    throw new VaultError(
      'SHARE_DIVERGED',
      `both versions changed ${conflicts.join(', ')}; nothing was written. Choose which side wins those entries: --prefer container (the file of ${m.name}) or --prefer file (${m.other.path})`,
    );
  }
  const taken = new Set(fromOther);
  withChangeTimesFrom(merged, (entry) => (taken.has(entry) ? theirs : ours));
  const now = Date.now();
  const losers = new Map<string, PastValue>(
    conflicts.map((entry) => {
      const loser = taken.has(entry) ? ours : theirs;
      return [entry, { value: loser.get(entry)!, changedAt: changeTime(loser, entry), replacedAt: now }];
    }),
  );
  withHistory(merged, mergeHistories([historyOf(ours), historyOf(theirs)], losers, keep));
  const historyOneSided = oneSidedHistory(ours, theirs, merged);
  return { merged, fromOther, conflicts, oneSided, historyOneSided };
}

/**
 * Across a membership change, the side on the older recipient list must have
 * been written by someone still on the newer one. A version written by a
 * member removed since is, at best, a write made concurrently with the
 * removal, and at worst one made after it on the old list by someone who
 * knows its key: a member who had not yet seen the removal accepts it, is
 * told to merge on seeing the divergence, and would carry it into the newer
 * list that every member then accepts. Its changes are refused instead.
 */
function refuseRemovedWriter(a: LoadedShared, b: LoadedShared, me: PublicIdentity): void {
  const [older, newer] = a.file.membership.epoch < b.file.membership.epoch ? [a, b] : [b, a];
  if (older.file.membership.epoch === newer.file.membership.epoch) return;
  if (stanzaIndex(newer.file.membership, older.file.write.writer) >= 0) return;
  throw new VaultError(
    'SHARE_SIGNER_NOT_MEMBER',
    `${older.path} holds version ${older.file.write.revision}, written by ${memberNamer(older.file, me)(older.file.write.writer.toString('hex'))} on recipient list ${older.file.membership.epoch}, ` +
      `who is not on the newer list ${newer.file.membership.epoch} of ${newer.path}: a member removed since. Its changes were not merged; nothing was written. ` +
      `Take the newer version as it is (stash container accept ${a.name}, with that file in place) and enter by hand any change you still want`,
  );
}

function withSecret<T>(dir: string, vaultKey: Buffer, fn: (x25519: Buffer, ed25519: Buffer) => T): T {
  const s = identitySecret(dir, vaultKey);
  try {
    return fn(s.x25519, s.ed25519);
  } finally {
    wipe(s.x25519);
    wipe(s.ed25519);
  }
}

/**
 * The merged file: the newer recipient list (bytes as signed by the owner) and
 * its content key, the later revision + 1, per member the later last write.
 */
function build(
  la: LoadedShared,
  lb: LoadedShared,
  entries: Map<string, Uint8Array>,
  me: PublicIdentity,
  x25519Secret: Buffer,
  ed25519Secret: Buffer,
): Buffer {
  const [a, b] = [la.file, lb.file];
  if (a.membership.epoch === b.membership.epoch && !a.membershipBytes.equals(b.membershipBytes)) {
    throw new VaultError(
      'SHARE_DIVERGED',
      'both versions changed who may open the container (the same recipient-list epoch, two different lists); only its owner can resolve that',
    );
  }
  const [base, baseLoaded] = b.membership.epoch > a.membership.epoch ? [b, lb] : [a, la];
  const key = openStanza(baseLoaded, me, x25519Secret);
  try {
    const stanzas = base.membership.stanzas;
    const revision = Math.max(a.write.revision, b.write.revision) + 1;
    const lastOf = (f: SharedFile, ed: Buffer) => {
      const i = f.membership.stanzas.findIndex((s) => s.ed25519.equals(ed));
      return i < 0 ? 0 : f.write.lastWrites[i]!;
    };
    const lastWrites = stanzas.map((s) =>
      s.ed25519.equals(me.ed25519) ? revision : Math.max(lastOf(a, s.ed25519), lastOf(b, s.ed25519)),
    );
    const write = {
      revision,
      writtenAt: Date.now(),
      writer: me.ed25519,
      lastWrites,
      bodyNonce: randomBytes(NONCE_BYTES),
    };
    const membership = baseLoaded.bytes.subarray(0, base.membershipBytes.length + base.ownerSignature.length);
    return assembleFile(membership, stanzas.length, write, key, entries, ed25519Secret);
  } finally {
    wipe(key);
  }
}
