/**
 * The versions a merge of a shared container starts from, loaded and checked:
 * ours (the container's file, or the one git gives its merge driver), theirs,
 * and the common version when there is one. Each passes every check but
 * history (signatures, the pinned owner, this vault a recipient, the same
 * container, no jump past what this vault saw); the common version must also
 * be contained in both sides.
 */
import { resolve } from 'node:path';
import { VaultError } from '../errors.js';
import { stanzaIndex } from './format.js';
import { covers, historyError, relate, seenOf } from './history.js';
import { checkJump } from './numbering.js';
import type { SeenRevision, SharedRecord } from './records.js';
import {
  memberNamer,
  readSharedFile,
  recipientIndex,
  verifySignatures,
  type LoadedShared,
  type PublicIdentity,
} from './verify.js';

/** The two versions of a merge, both checked, and what each step of it needs. */
export interface Merging {
  dir: string;
  name: string;
  me: PublicIdentity;
  /** Ours: the version in the container's own file (for git's merge driver, the file git gave). */
  cur: LoadedShared;
  /** Theirs: the version at the path given. */
  other: LoadedShared;
  /** The common version both grew from, when known. */
  base: LoadedShared | null;
  record: SharedRecord;
  /**
   * How a refusal names ours, theirs and the common version, and what it
   * says last: how to choose a side ('' for nothing).
   */
  labels: { ours: string; theirs: string; base: string; choose: string };
  /** Throws unless `next` is a version this vault may accept after the one it saw last. */
  toSeen: (next: SeenRevision, what: string) => void;
}

/**
 * Checks ours (`cur`, whose record this vault keeps) and loads the file at
 * `otherPath` (and at `basePath`), each past every check but history:
 * signatures, the pinned owner, this vault a recipient, the same container,
 * and no jump past what this vault saw.
 */
export function loadBoth(
  dir: string,
  cur: LoadedShared,
  otherPath: string,
  basePath: string | null,
  me: PublicIdentity,
  labels: Merging['labels'],
): Merging {
  const { name, record } = cur;
  if (!record)
    throw new VaultError(
      'SHARE_UNTRUSTED_OWNER',
      `this vault has no record of shared container ${name}; run: stash container accept ${name}`,
    );
  verifySignatures(cur.file, cur.path, record.owner, name);
  recipientIndex(cur, me);
  const other = loadSameContainer(cur, otherPath);
  recipientIndex(other, me);
  // The merged version is numbered after the later side: neither may jump past what this vault saw.
  checkJump(record.seen, cur.file, cur.path, name);
  checkJump(record.seen, other.file, other.path, name);
  const nameOf = memberNamer(cur.file, me);
  const toSeen = (next: SeenRevision, what: string): void => {
    const err = historyError(relate(record.seen, next), record.seen, next, what, name, nameOf);
    if (err) throw err;
  };
  const base = basePath === null ? null : loadBase(cur, other, basePath, me);
  return { dir, name, me, cur, other, base, record, labels, toSeen };
}

/** The file at `path`, if it holds the container of `cur`, signed as `cur`'s record requires. */
function loadSameContainer(cur: LoadedShared, given: string): LoadedShared {
  const path = resolve(given);
  const { bytes, file } = readSharedFile(path, () => new VaultError('FILE_NOT_FOUND', `${path} does not exist`));
  if (!file.membership.containerId.equals(cur.file.membership.containerId))
    throw new VaultError('CONTAINER_CORRUPT', `${path} holds another container than ${cur.name}`);
  verifySignatures(file, path, cur.record!.owner, cur.name);
  return { name: cur.name, path, bytes, file, record: cur.record, next: seenOf(file, bytes) };
}

/**
 * The common version: signed like the others, contained in both sides (else
 * it would make one side's old values look like changes), and open to this
 * vault (a member added since cannot read it, and merges without it).
 */
function loadBase(cur: LoadedShared, other: LoadedShared, given: string, me: PublicIdentity): LoadedShared {
  const base = loadSameContainer(cur, given);
  const lacking = [cur, other].filter((side) => !covers(side.next, base.next));
  if (lacking.length > 0)
    throw new VaultError(
      'SHARE_DIVERGED',
      `${base.path} (version ${base.next.revision}) is not a version that both sides grew from: ${lacking.map((l) => `${l.path} (version ${l.next.revision})`).join(' and ')} ${lacking.length > 1 ? 'lack' : 'lacks'} its changes. ` +
        'Give the common version (after a git conflict: git show :1:<path> > FILE), or merge without one; nothing was written',
    );
  if (stanzaIndex(base.file.membership, me.ed25519) < 0)
    throw new VaultError(
      'SHARE_NOT_RECIPIENT',
      `you were not a recipient of the common version ${base.path} (version ${base.next.revision}), so it cannot be opened; merge without it: stash container merge ${cur.name} ${other.path}`,
    );
  return base;
}
