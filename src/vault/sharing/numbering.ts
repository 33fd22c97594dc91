/**
 * Limits on revision numbers, so that no member can use the numbering up.
 *
 * Every write needs the revision after the current one, and revisions must
 * stay exact in a JS number. A member who signs revision 2^53-1 (or gives
 * every member that last write) leaves no next revision: every set, share and
 * unshare after it failed, the owner's unshare of that member included. So a
 * reader refuses, naming the writer:
 *
 * - a revision above MAX_REVISION, and any last write above the revision;
 * - a revision more than MAX_JUMP past the one it saw last (history), so that
 *   climbing to MAX_REVISION takes 2^28 versions that readers accepted in turn,
 *   not one.
 *
 * The owner can then still remove that member: unshare starts again from the
 * refused file (signatures checked, numbering not) with a revision MAX_JUMP/2
 * past the one the owner saw, every remaining member's last write at that
 * revision, so every member who saw any honest version takes it as a later one.
 */
import { VaultError } from '../errors.js';
import { fingerprintOf, formatFingerprint } from '../fingerprint.js';
import { NONCE_BYTES } from '../aead.js';
import { randomBytes } from '../secure.js';
import type { SharedFile, Stanza, WriteInfo } from './format.js';
import type { SeenRevision } from './records.js';

/** The largest revision a reader accepts: half the exact range of a JS number, the other half headroom. */
export const MAX_REVISION = 2 ** 52;
/**
 * The largest step past the revision a reader saw last. An honest writer adds
 * 1 per write (a merge: the larger side + 1): 16.7 million writes between two
 * reads of one member is far beyond any team's use.
 */
export const MAX_JUMP = 2 ** 24;

/** A version refused for its numbering; `writer` is the member who signed it. */
export class NumberingError extends VaultError {
  readonly writer: { x25519: Buffer; ed25519: Buffer };

  constructor(writer: { x25519: Buffer; ed25519: Buffer }, message: string) {
    super('CONTAINER_CORRUPT', message);
    this.writer = writer;
  }
}

function writerOf(file: SharedFile): Stanza {
  const s = file.membership.stanzas.find((x) => x.ed25519.equals(file.write.writer));
  // Only called once the writer's signature and membership were checked.
  if (!s) throw new VaultError('CONTAINER_CORRUPT', 'the writer of this version is not one of its recipients');
  return s;
}

function refusal(file: SharedFile, path: string, name: string, problem: string, jump: boolean): NumberingError {
  const w = writerOf(file);
  const fp = formatFingerprint(fingerprintOf(w.x25519, w.ed25519));
  const why = jump
    ? 'A jump like this brings the numbering near its end'
    : 'A version numbered like this would stop every later write';
  const onPurpose = jump
    ? `. A member who knows why it jumped can take it as it is: stash container accept ${name}`
    : '';
  return new NumberingError(
    { x25519: w.x25519, ed25519: w.ed25519 },
    `${path} was refused: version ${file.write.revision} of ${name}, written by ${fp}, ${problem}. Nothing was read or written. ` +
      `${why}; the owner can remove its writer (stash container unshare ${name} ${fp}), and everyone reads on${onPurpose}`,
  );
}

/** Step 3 of a read, after the writer's signature: the numbers leave room for later versions. */
export function checkNumbering(file: SharedFile, path: string, name: string): void {
  const w = file.write;
  if (w.revision > MAX_REVISION) {
    throw refusal(file, path, name, `leaves no room for later versions (at most ${MAX_REVISION} is accepted)`, false);
  }
  const above = w.lastWrites.find((n) => n > w.revision);
  if (above !== undefined)
    throw refusal(file, path, name, `gives a member a last write (${above}) above the version itself`, false);
}

/** Step 4, before history: a revision too far past the one this vault saw last. */
export function checkJump(seen: SeenRevision, file: SharedFile, path: string, name: string): void {
  const jump = file.write.revision - seen.revision;
  if (jump > MAX_JUMP) {
    throw refusal(
      file,
      path,
      name,
      `is ${jump} past version ${seen.revision}, the last one this vault saw (at most ${MAX_JUMP} is accepted)`,
      true,
    );
  }
}

/**
 * The write block of the owner's version that replaces a refused one: a
 * revision MAX_JUMP/2 past the one the owner saw (within reach of every
 * member who saw a version within MAX_JUMP/2 of it), every member's last write
 * at that revision, so that no member's value goes down for anyone.
 */
export function restartWrite(seen: SeenRevision, stanzas: Stanza[], writer: Buffer): WriteInfo {
  const revision = seen.revision + MAX_JUMP / 2;
  if (revision > MAX_REVISION) {
    throw new VaultError(
      'CONTAINER_CORRUPT',
      `the container's numbering is used up (version ${seen.revision}); copy its entries into a new container`,
    );
  }
  return {
    revision,
    writtenAt: Date.now(),
    writer,
    lastWrites: stanzas.map(() => revision),
    bodyNonce: randomBytes(NONCE_BYTES),
  };
}
