/**
 * Merging for git's merge driver: git hands over three files (the common
 * version, ours, theirs) and takes the result back in ours. Nothing in the
 * vault or in the working tree is written here: git writes the result into
 * the working tree itself, and the vault takes it, as any later version, on
 * its next read. Recording it as seen now would make ours a rollback if the
 * git merge were then aborted.
 */
import { resolve } from 'node:path';
import { checkKeep } from '../entry-history.js';
import { VaultError } from '../errors.js';
import { identityPublic } from '../identity.js';
import { requireVaultKey } from '../meta-file.js';
import { loadBoth } from './merge-load.js';
import { planMerge, type MergePlan } from './merge.js';
import { listRecords, readRecord } from './records.js';
import { seenOf } from './history.js';
import { readSharedFile, type LoadedShared } from './verify.js';

function read(path: string): ReturnType<typeof readSharedFile> {
  return readSharedFile(path, () => new VaultError('FILE_NOT_FOUND', `${path} does not exist`));
}

/**
 * The name under which vault `dir` keeps the shared container held in the file
 * at `path` (found by its container id; the file git gives a merge driver is a
 * temporary copy, named nothing like the container). No key is needed.
 */
export function sharedContainerOfFile(dir: string, path: string): string {
  const full = resolve(path);
  const id = read(full).file.membership.containerId;
  const hit = listRecords(dir).find((r) => r.record?.containerId.equals(id));
  if (!hit)
    throw new VaultError(
      'CONTAINER_NOT_FOUND',
      `this vault has no shared container with the id of ${full} (${id.toString('hex')}); link the repository's file first: stash container link PATH`,
    );
  return hit.name;
}

/**
 * The merge of theirs into ours for shared container `name`, against the
 * common version `base` (null: none, as in a merge without one), signed with
 * this vault's identity and returned, written nowhere. A conflict is refused
 * (SHARE_DIVERGED, naming each entry and what each side did); every check of
 * `mergeShared` runs, with ours in place of the container's own file.
 */
export function mergeSharedFiles(
  dir: string,
  vaultKey: Buffer,
  name: string,
  paths: { base: string | null; ours: string; theirs: string },
  keep: number,
): MergePlan {
  checkKeep(keep);
  requireVaultKey(dir, vaultKey);
  const pub = identityPublic(dir, vaultKey);
  const me = { x25519: pub.x25519, ed25519: pub.ed25519 };
  const record = readRecord(dir, name);
  const path = resolve(paths.ours);
  const { bytes, file } = read(path);
  if (record && !file.membership.containerId.equals(record.containerId))
    throw new VaultError('CONTAINER_CORRUPT', `${path} holds another container than ${name}`);
  const ours: LoadedShared = { name, path, bytes, file, record, next: seenOf(file, bytes) };
  // No advice on choosing here: the merge driver says how to finish by hand.
  const labels = { ours: 'ours', theirs: 'theirs', base: 'the common version', choose: '' };
  const m = loadBoth(dir, ours, paths.theirs, paths.base, me, labels);
  return planMerge(m, vaultKey, null, keep);
}
