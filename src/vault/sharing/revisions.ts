/**
 * Making a new revision of a shared container: the recipient list (signed by
 * the owner), the write block, the body encrypted under the content key, and
 * the writer's signature; then a compare-and-swap write under the linked
 * file's lock, so a file that another member or program replaced meanwhile is
 * never overwritten.
 */
import { lstatSync, readdirSync, unlinkSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { NONCE_BYTES, sealWithNonce } from '../aead.js';
import { encodeBody } from '../container-body.js';
import { keyCommitment } from '../container-format.js';
import { VaultError } from '../errors.js';
import { atomicWrite, ensureDir, readBounded } from '../fs-atomic.js';
import { randomBytes, wipe } from '../secure.js';
import type { ContainerRef } from '../names.js';
import { writeUserFile } from '../user-file.js';
import { fileHash, sealKey, signMembership, signWrite } from './crypto.js';
import {
  decodeShared,
  encodeMembership,
  encodeWrite,
  MAX_SHARED_FILE_BYTES,
  type SharedFile,
  type Stanza,
  type WriteInfo,
} from './format.js';
import { seenOf } from './history.js';
import { assertLockHeld, withFileLock } from './file-lock.js';
import { ownCopyPath, readRecord, sharedDir, writeRecord, type SharedRecord } from './records.js';
import type { PublicIdentity } from './verify.js';

/**
 * The signed recipient list: bytes 0 .. S+63. `reuse` keeps the sealed keys
 * of members who stay (when the content key does not change); everyone else
 * gets the content key sealed anew.
 */
export function signedMembership(
  containerId: Buffer,
  epoch: number,
  contentKey: Buffer,
  members: PublicIdentity[],
  ownerSecret: Buffer,
  reuse: Stanza[] = [],
): { bytes: Buffer; stanzas: Stanza[] } {
  const stanzas = members.map((m) => {
    const kept = reuse.find((s) => s.ed25519.equals(m.ed25519) && s.x25519.equals(m.x25519));
    return { x25519: m.x25519, ed25519: m.ed25519, sealedKey: kept ? kept.sealedKey : sealKey(contentKey, m.x25519) };
  });
  const unsigned = encodeMembership({
    containerId,
    epoch,
    commitment: keyCommitment(contentKey, containerId),
    stanzas,
  });
  return { bytes: Buffer.concat([unsigned, signMembership(unsigned, ownerSecret)]), stanzas };
}

/**
 * The write block of the revision after `base` (null: the first), written by
 * `writer`: every member's last write carried forward, the writer's set to
 * the new revision, and members new to the list also at the new revision.
 *
 * Why not 0 for a new member: the value must never go down along one history,
 * or readers see a lost write. A member removed and added again may have last
 * written revision 7 in a file some reader saw; starting them again at 0 made
 * every later version look as if it lacked that write (SHARE_DIVERGED for
 * the member and for anyone who had not read the removal). The revision that
 * adds them is above any revision they wrote before on this history.
 */
export function nextWrite(base: SharedFile | null, stanzas: Stanza[], writer: Buffer): WriteInfo {
  const revision = (base?.write.revision ?? 0) + 1;
  const lastWrites = stanzas.map((s) => {
    if (s.ed25519.equals(writer)) return revision;
    const i = base ? base.membership.stanzas.findIndex((b) => b.ed25519.equals(s.ed25519)) : -1;
    return i >= 0 ? base!.write.lastWrites[i]! : revision;
  });
  return { revision, writtenAt: Date.now(), writer, lastWrites, bodyNonce: randomBytes(NONCE_BYTES) };
}

/** The whole file: membership, write block, body under `contentKey`, writer signature. */
export function assembleFile(
  membership: Buffer,
  recipients: number,
  write: WriteInfo,
  contentKey: Buffer,
  entries: ReadonlyMap<string, Uint8Array>,
  writerSecret: Buffer,
): Buffer {
  const header = Buffer.concat([membership, encodeWrite(write, recipients)]);
  const plain = encodeBody(entries);
  try {
    const signed = Buffer.concat([header, sealWithNonce(plain, header, write.bodyNonce, contentKey)]);
    return Buffer.concat([signed, signWrite(signed, writerSecret)]);
  } finally {
    wipe(plain);
  }
}

/** A write takes well under a second; a temp file this old beside a shared file is a crashed write's. */
export const STALE_TEMP_MS = 10 * 60 * 1000;

/**
 * Removes temp files of crashed writes of `path` (`.<name>.tmp-<12 hex>`, as
 * atomicWrite names them) that are older than STALE_TEMP_MS. The vault lock
 * sweeps the vault's own folders; a linked file's folder (a git checkout, a
 * shared folder) is swept only here, for that one file, and only of stale
 * files, since another machine's write may be in progress in a shared folder.
 */
export function sweepStaleTemps(path: string): void {
  const prefix = `.${basename(path)}.tmp-`;
  const folder = dirname(path);
  let names: string[];
  try {
    names = readdirSync(folder);
  } catch {
    return;
  }
  const cutoff = Date.now() - STALE_TEMP_MS;
  for (const name of names) {
    if (!name.startsWith(prefix) || !/^[0-9a-f]{12}$/.test(name.slice(prefix.length))) continue;
    try {
      const st = lstatSync(join(folder, name));
      if (st.isFile() && st.mtimeMs < cutoff) unlinkSync(join(folder, name));
    } catch {
      // Gone already, or not ours to remove: the next write tries again.
    }
  }
}

/**
 * Replaces `path` with `bytes` only if it still holds the bytes whose hash is
 * `expected` (null: only if it does not exist). SHARE_CHANGED otherwise,
 * ending with `hint` when given. `shared`: a file outside the vault that other
 * members write, so the check and the rename happen under its lock
 * (file-lock.ts; without it two writers could both pass the check before
 * either renamed, and one acknowledged write was lost), and the file keeps
 * its mode and group so that the other members can still read it. `userNamed`: a path the user
 * named for this one write (`container export`), written only if it is a regular file or new
 * (user-file.ts). Stale temp files of earlier crashed writes of `path` are swept afterwards.
 */
export function writeIfUnchanged(
  path: string,
  bytes: Buffer,
  expected: Buffer | null,
  opts: { shared?: boolean; hint?: string; userNamed?: boolean } = {},
): void {
  const shared = opts.shared === true;
  const writeFile = opts.userNamed === true ? writeUserFile : atomicWrite;
  const write = () =>
    writeFile(path, [bytes], {
      shared,
      beforeRename() {
        if (shared) assertLockHeld(path);
        const now = readBounded(
          path,
          MAX_SHARED_FILE_BYTES + 1024 * 1024,
          () =>
            new VaultError(
              'SHARE_CHANGED',
              `${path} was replaced by something that is not a container file while this write was made; nothing was written`,
            ),
        );
        const same = expected === null ? now === null : now !== null && fileHash(now).equals(expected);
        if (!same) {
          throw new VaultError(
            'SHARE_CHANGED',
            `${path} changed while this write was being made (another member or program wrote it at the same moment); nothing was written: run the command again${opts.hint ?? ''}`,
          );
        }
      },
    });
  if (shared) withFileLock(path, write);
  else write();
  sweepStaleTemps(path);
}

/**
 * Runs `fn` (a read-modify-write of container `name`) holding the lock of its
 * linked file, if it has one, so that members writing at once take turns
 * instead of failing each other's compare-and-swap. Call under the vault lock
 * (always taken first: no lock order to get wrong).
 */
export function withWriteLock<T>(dir: string, ref: ContainerRef, fn: () => T): T {
  const link = readRecord(dir, ref)?.link;
  return link ? withFileLock(link, fn) : fn();
}

/**
 * Writes a new revision over `base` (compare-and-swap) and remembers it as
 * seen. Call under the vault lock. For a linked file, the version is first
 * kept in the vault (ownCopyPath), so that it can be merged back if the write
 * is refused, or if something else replaces the file after it.
 */
export function commitRevision(
  dir: string,
  path: string,
  baseBytes: Buffer | null,
  bytes: Buffer,
  record: Omit<SharedRecord, 'seen'>,
): SharedFile {
  const file = decodeShared(bytes, path);
  let hint = '';
  if (record.link !== null) {
    const copy = ownCopyPath(dir, record.name);
    ensureDir(sharedDir(dir));
    atomicWrite(copy, [bytes]);
    hint = ` (or take this version as it was made: stash container merge ${record.name} ${copy})`;
  }
  writeIfUnchanged(path, bytes, baseBytes === null ? null : fileHash(baseBytes), {
    shared: record.link !== null,
    hint,
  });
  writeRecord(dir, { ...record, seen: seenOf(file, bytes) });
  return file;
}
