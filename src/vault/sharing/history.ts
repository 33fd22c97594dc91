/**
 * Judging a revision against the one a vault saw last. Each file carries, per
 * member, the revision that member last wrote (a version vector); an honest
 * writer carries every other member's value forward and sets its own. So:
 *
 *   same hash                                   -> the same revision
 *   newer revision, no member's value went down -> a later revision (accepted)
 *   older revision, no member's value went up   -> an earlier one: rollback
 *   older membership epoch                      -> rollback (a stale recipient list)
 *   anything else (same number, other bytes; a member's write missing) -> diverged
 *
 * "Diverged" is what two members writing at once from the same base produce,
 * and what taking one side of a git conflict would silently lose; both are
 * refused. Members missing from either side (added or removed since) are not
 * compared.
 */
import { VaultError } from '../errors.js';
import { fingerprintOf, formatFingerprint } from '../fingerprint.js';
import { fileHash } from './crypto.js';
import type { SharedFile } from './format.js';
import type { SeenRevision } from './records.js';

export type Relation = 'same' | 'newer' | 'rollback' | 'diverged';

/** What a reader remembers of a file it accepted. */
export function seenOf(file: SharedFile, bytes: Buffer): SeenRevision {
  const lastWrites = new Map<string, number>();
  file.membership.stanzas.forEach((s, i) => {
    lastWrites.set(s.ed25519.toString('hex'), file.write.lastWrites[i]!);
  });
  return {
    revision: file.write.revision,
    epoch: file.membership.epoch,
    hash: fileHash(bytes),
    lastWrites,
    writer: file.write.writer.toString('hex'),
    writtenAt: file.write.writtenAt,
  };
}

/** How `next` relates to `seen`. */
export function relate(seen: SeenRevision, next: SeenRevision): Relation {
  if (next.hash.equals(seen.hash)) return 'same';
  if (next.epoch < seen.epoch) return 'rollback';
  let up = false;
  let down = false;
  for (const [member, was] of seen.lastWrites) {
    const now = next.lastWrites.get(member);
    if (now === undefined) continue;
    if (now > was) up = true;
    if (now < was) down = true;
  }
  if (next.revision > seen.revision && !down) return 'newer';
  if (next.revision < seen.revision && !up) return 'rollback';
  return 'diverged';
}

/**
 * True when `a` contains every write of `b`: no member's last write is lower
 * in `a`, and `a` is at least as far along. (Membership epochs are not
 * compared: merging judges them separately.)
 */
export function covers(a: SeenRevision, b: SeenRevision): boolean {
  if (a.revision === b.revision) return a.hash.equals(b.hash); // one number, two contents: neither holds the other
  if (a.revision < b.revision) return false;
  for (const [member, n] of b.lastWrites) {
    const m = a.lastWrites.get(member);
    if (m !== undefined && m < n) return false;
  }
  return true;
}

/** "revision 7 (written by <who> at <when>)" for messages. */
export function describeRevision(s: SeenRevision, nameOf: (ed25519Hex: string) => string): string {
  return `version ${s.revision} (written by ${nameOf(s.writer)} at ${new Date(s.writtenAt).toISOString()})`;
}

/**
 * The error for a refused relation, or null for an acceptable one. `what` names
 * the file; `nameOf` turns a member key into something a person recognises.
 */
export function historyError(
  relation: Relation,
  seen: SeenRevision,
  next: SeenRevision,
  what: string,
  name: string,
  nameOf: (ed25519Hex: string) => string,
): VaultError | null {
  if (relation === 'same' || relation === 'newer') return null;
  const had = describeRevision(seen, nameOf);
  const got = describeRevision(next, nameOf);
  if (relation === 'rollback') {
    const why =
      next.epoch < seen.epoch
        ? `its recipient list (epoch ${next.epoch}) is older than the one this vault already saw (epoch ${seen.epoch})`
        : `this vault already saw ${had}`;
    // Going back to an older recipient list is never offered: it would let members removed since read what is written next.
    const onPurpose =
      next.epoch < seen.epoch
        ? ''
        : `; if you really mean to go back to this version, run: stash container accept ${name}`;
    return new VaultError(
      'SHARE_ROLLBACK',
      `${what} holds ${got}, an older version of container ${name}: ${why}. It was refused, so that an old copy cannot bring back removed members or old secrets. ` +
        `Get the current file back (for example git pull, or from the owner)${onPurpose}`,
    );
  }
  return new VaultError(
    'SHARE_DIVERGED',
    `${what} holds ${got}, but this vault last saw ${had}, and neither contains the other's changes: ` +
      'two members wrote at the same time, or one side of a conflict replaced the other. Nothing was read or written, so nothing is lost yet. ' +
      `To keep both, put the other version in a file and run: stash container merge ${name} FILE ` +
      `(after a git conflict: git show :3:<path> > FILE for theirs, :2: for yours). ` +
      `To take this file as it is and give up the changes it lacks, run: stash container accept ${name}`,
  );
}

/** A member key shown as a fingerprint-like short form when nothing better is known. */
export function shortKey(ed25519Hex: string, x25519?: Buffer): string {
  if (x25519) return formatFingerprint(fingerprintOf(x25519, Buffer.from(ed25519Hex, 'hex')));
  return `key ${ed25519Hex.slice(0, 16)}`;
}
