/**
 * Renaming a shared container changes only what this vault calls it: the
 * record (shared/NAME.json, with its rollback history) and, for a copy kept
 * in the vault, the copy's file name. The container file's bytes, its id and
 * its members stay as they are, so the other members see no change and a
 * linked file (a git checkout, a shared folder) is not touched at all.
 *
 * Order, under the vault lock: the new record first, then the copy's file,
 * then the old record. A crash part-way leaves the old name working (or, after
 * the file moved, a new record with its file and a stale old record, which
 * `stash container rm OLD` removes); the rollback history is never lost.
 */
import { existsSync, renameSync } from 'node:fs';
import { ioError, VaultError } from '../errors.js';
import { fsyncDir, removeFile } from '../fs-atomic.js';
import { withVaultLock } from '../lock.js';
import { validateContainerName } from '../names.js';
import { vaultPaths } from '../paths.js';
import { ownCopyPath, readRecord, recordPath, removeRecord, writeRecord } from './records.js';

/** Renames shared container `from` to `to` in this vault; CONTAINER_NOT_FOUND, CONTAINER_EXISTS. */
export function renameShared(dir: string, from: string, to: string): { path: string; link: string | null } {
  validateContainerName(from);
  validateContainerName(to);
  return withVaultLock(dir, () => {
    const record = readRecord(dir, from);
    if (record === null)
      throw new VaultError(
        'CONTAINER_NOT_FOUND',
        `no shared container named ${JSON.stringify(from)} in the vault at ${dir}`,
      );
    const paths = vaultPaths(dir);
    if (existsSync(paths.container(to)) || existsSync(recordPath(dir, to)))
      throw new VaultError('CONTAINER_EXISTS', `a container named ${JSON.stringify(to)} already exists`);
    writeRecord(dir, { ...record, name: to });
    if (record.link === null) {
      try {
        renameSync(paths.container(from), paths.container(to));
        fsyncDir(paths.containers);
      } catch (err) {
        removeFile(recordPath(dir, to));
        throw ioError(err, 'rename', paths.container(from));
      }
    }
    // This vault's own last write of a linked file travels with the name (`container merge` finds it by name).
    if (existsSync(ownCopyPath(dir, from))) {
      try {
        renameSync(ownCopyPath(dir, from), ownCopyPath(dir, to));
      } catch {
        /* only a convenience copy; removeRecord drops it below */
      }
    }
    removeRecord(dir, from);
    return { path: record.link ?? paths.container(to), link: record.link };
  });
}
