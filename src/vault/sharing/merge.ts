/**
 * Merging two versions of a shared container that diverged (two members wrote
 * from the same base; a git conflict). The result is a new version that
 * contains both: the entries each side changed, the newer recipient list, and
 * per member the later of their two last writes, so every member who saw
 * either side accepts it as a later version, without `accept`.
 *
 * Which value each stored key keeps is merge-rule.ts's: with the common
 * version both grew from, only a key both sides changed differently is a
 * conflict; without it, any key both hold with different values is, and a key
 * one side lacks is kept. A conflict is refused unless the caller says which
 * side wins; the losing value joins that entry's history.
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
import { loadBoth, type Merging } from './merge-load.js';
import { describeConflicts, threeWay, twoWay, type EntryConflict, type Winner } from './merge-rule.js';
import { VaultError } from '../errors.js';
import { identityPublic, identitySecret } from '../identity.js';
import { withVaultLock } from '../lock.js';
import { requireVaultKey } from '../meta-file.js';
import { randomBytes, wipe } from '../secure.js';
import { decodeShared, stanzaIndex, type SharedFile } from './format.js';
import { covers, seenOf } from './history.js';
import { assembleFile, commitRevision, withWriteLock } from './revisions.js';
import { openSharedBody, openStanza } from './shared-entries.js';
import { loadShared, memberNamer, type LoadedShared, type PublicIdentity } from './verify.js';

export interface MergeResult {
  outcome: 'merged' | 'fast-forward' | 'unchanged';
  /** The version now in the container's file. */
  revision: number;
  /** Entries taken from the other file (new there, or changed there and chosen). */
  fromOther: string[];
  /** Entries both sides changed (differently); the side `prefer` named won them. */
  conflicts: string[];
  /** What each side did to each of `conflicts` (without a common version: 'changed' on both). */
  conflictChanges: EntryConflict[];
  /** Entries the other file removed and the container's file still held (with a common version only). */
  removed: string[];
  /**
   * Entries only one side holds, all kept (without a common version only). Without it a merge
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

/**
 * Names with no current value after the merge whose history only one side
 * holds: the other may have purged it. With the common version, only those
 * whose history it held and a side lacks (a purge for certain).
 */
function oneSidedHistory(
  base: Entries | null,
  ours: Entries,
  theirs: Entries,
  merged: ReadonlyMap<string, Uint8Array>,
): string[] {
  const [a, b] = [historyOf(ours), historyOf(theirs)];
  const names =
    base === null
      ? [...a.keys()].filter((n) => !b.has(n)).concat([...b.keys()].filter((n) => !a.has(n)))
      : [...historyOf(base).keys()].filter((n) => a.has(n) !== b.has(n));
  return names.filter((n) => !merged.has(n)).sort();
}

/** A merge worked out and signed, not yet written anywhere; `bytes` is the file that holds it. */
export type MergePlan = MergeResult & { bytes: Buffer };

/**
 * Merges the version at `otherPath` into container `name` of vault `dir`.
 * Both files must pass every check but history (signatures, the pinned owner,
 * this vault a recipient); the result must be a later version than the one
 * this vault saw last. When one file already contains the other, the later
 * one is simply kept. `basePath`: the common version of both (checked the
 * same way, and contained in both), for the three-way rule.
 */
export function mergeShared(
  dir: string,
  vaultKey: Buffer,
  name: string,
  otherPath: string,
  prefer: Prefer = null,
  keep = DEFAULT_HISTORY_KEEP,
  basePath: string | null = null,
): MergeResult {
  checkKeep(keep);
  requireVaultKey(dir, vaultKey);
  const pub = identityPublic(dir, vaultKey);
  const me = { x25519: pub.x25519, ed25519: pub.ed25519 };
  return withVaultLock(dir, () =>
    withWriteLock(dir, name, () => {
      const cur = loadShared(dir, name);
      const [ours, theirs] = [`the file of ${name}`, resolve(otherPath)];
      const labels = {
        ours,
        theirs,
        base: `the common version ${basePath === null ? '' : resolve(basePath)}`,
        choose: `Choose which side wins those entries: --prefer container (${ours}) or --prefer file (${theirs})`,
      };
      const m = loadBoth(dir, cur, otherPath, basePath, me, labels);
      const { bytes, ...result } = planMerge(m, vaultKey, prefer, keep);
      if (result.outcome !== 'unchanged') commitRevision(dir, cur.path, cur.bytes, bytes, m.record);
      return result;
    }),
  );
}

/**
 * The merge of `m` as a file, signed with this vault's identity, written
 * nowhere: ours as it is ('unchanged'), theirs as it is ('fast-forward'), or a
 * new version ('merged').
 */
export function planMerge(m: Merging, vaultKey: Buffer, prefer: Prefer, keep: number): MergePlan {
  const kept = keepLater(m);
  if (kept !== null) return kept;
  refuseRemovedWriter(m.cur, m.other, m.me);
  return withSecret(m.dir, vaultKey, (x25519Secret, ed25519Secret) =>
    mergeVersions(m, prefer, keep, x25519Secret, ed25519Secret),
  );
}

/** A result that took nothing from the other side; `bytes` is the file kept. */
function nothingTaken(outcome: 'unchanged' | 'fast-forward', kept: LoadedShared): MergePlan {
  return {
    outcome,
    revision: kept.next.revision,
    bytes: kept.bytes,
    fromOther: [],
    conflicts: [],
    conflictChanges: [],
    removed: [],
    oneSided: [],
    historyOneSided: [],
  };
}

/**
 * When one version already contains the other, the later one is kept as it is
 * ('unchanged': ours; 'fast-forward': theirs); null when neither does and the
 * two must be merged.
 */
function keepLater(m: Merging): MergePlan | null {
  const { cur, other } = m;
  if (cur.next.hash.equals(other.next.hash) || (covers(cur.next, other.next) && cur.next.epoch >= other.next.epoch)) {
    m.toSeen(cur.next, cur.path); // the other adds nothing; the container's own file must still be acceptable
    return nothingTaken('unchanged', cur);
  }
  if (covers(other.next, cur.next) && other.next.epoch >= cur.next.epoch) {
    m.toSeen(other.next, other.path);
    return nothingTaken('fast-forward', other);
  }
  return null;
}

/** Opens the versions, unites them, and signs the merged version; every opened entry is wiped after. */
function mergeVersions(
  m: Merging,
  prefer: Prefer,
  keep: number,
  x25519Secret: Buffer,
  ed25519Secret: Buffer,
): MergePlan {
  const { cur, other } = m;
  const opened: Entries[] = [];
  const open = (l: LoadedShared): Entries => {
    const e = decrypt(l, m.me, x25519Secret);
    opened.push(e);
    return e;
  };
  try {
    const [ours, theirs] = [open(cur), open(other)];
    const base = m.base === null ? null : open(m.base);
    const { merged, ...taken } = uniteSides(base, ours, theirs, prefer, keep, m);
    const bytes = build(cur, other, merged, m.me, x25519Secret, ed25519Secret);
    const result = seenOf(decodeShared(bytes, cur.path), bytes);
    m.toSeen(result, 'the merged version');
    return { outcome: 'merged', revision: result.revision, bytes, ...taken };
  } finally {
    for (const e of opened) wipeEntries(e);
  }
}

/**
 * Both sides' entries in one map by merge-rule.ts, refused on a conflict
 * unless `prefer` says which side wins. Each entry keeps the change time of
 * the side it was taken from; the histories are united, and the value that
 * lost a conflict joins them.
 */
function uniteSides(
  base: Entries | null,
  ours: Entries,
  theirs: Entries,
  prefer: Prefer,
  keep: number,
  m: Merging,
): Omit<MergeResult, 'outcome' | 'revision'> & { merged: Map<string, Uint8Array> } {
  const winner: Winner = prefer === null ? null : prefer === 'file' ? 'theirs' : 'ours';
  const rule = base === null ? twoWay(ours, theirs, winner) : threeWay(base, ours, theirs, winner);
  const { merged, fromOther, conflicts } = rule;
  if (conflicts.length > 0 && winner === null) {
    const what =
      base === null
        ? `both versions changed ${conflicts.map((c) => c.key).join(', ')}`
        : `both sides changed ${describeConflicts(conflicts, m.labels)} since ${m.labels.base}`;
    const choose = m.labels.choose === '' ? '' : `. ${m.labels.choose}`;
    throw new VaultError('SHARE_DIVERGED', `${what}; nothing was written${choose}`);
  }
  const taken = new Set(fromOther);
  withChangeTimesFrom(merged, (entry) => (taken.has(entry) ? theirs : ours));
  const now = Date.now();
  const loser = winner === 'theirs' ? ours : theirs;
  const losers = new Map<string, PastValue>();
  for (const { key } of conflicts) {
    const value = loser.get(key);
    if (value !== undefined) losers.set(key, { value, changedAt: changeTime(loser, key), replacedAt: now });
  }
  withHistory(merged, mergeHistories([historyOf(ours), historyOf(theirs)], losers, keep));
  const historyOneSided = oneSidedHistory(base, ours, theirs, merged);
  return {
    merged,
    fromOther,
    conflicts: conflicts.map((c) => c.key),
    conflictChanges: conflicts,
    removed: rule.removed,
    oneSided: rule.oneSided,
    historyOneSided,
  };
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
