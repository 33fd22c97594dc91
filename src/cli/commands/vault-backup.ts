/**
 * `stash vault backup FILE [--force]` and `stash vault restore FILE [--into DIR] [--force]`
 * (src/vault/backup.ts has the file layout). A restore is made in a private
 * folder beside its target and checked whole before it takes the target's
 * place: the password of the backup opens it, its MAC matches, every
 * container opens with the restored keys. An existing vault is replaced only
 * with --force, and is then moved aside, never deleted.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, lstatSync, mkdirSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { StashError } from '../../errors.js';
import { VaultError } from '../../vault/errors.js';
import { buildBackup, MAX_BACKUP_BYTES, parseBackup, verifyBackup, type BackupContents } from '../../vault/backup.js';
import { wipeEntries } from '../../vault/container-body.js';
import { listContainers, readEntries, unwrapContentKey } from '../../vault/containers.js';
import { readBounded } from '../../vault/fs-atomic.js';
import { defaultVaultDir, vaultExists } from '../../vault/paths.js';
import { wipe } from '../../vault/secure.js';
import { readRecord, writeRecord } from '../../vault/sharing/records.js';
import { checkOutputPath, writeUserFile } from '../../vault/user-file.js';
import { readVaultInfo } from '../../vault/vault.js';
import { formatBytes, note, out } from '../output.js';
import type { Invocation } from '../command-types.js';
import { Session } from '../session.js';

export async function run(inv: Invocation): Promise<number> {
  return inv.command.path[1] === 'backup' ? backup(inv) : restore(inv);
}

async function backup(inv: Invocation): Promise<number> {
  const file = resolve(inv.positionals[0]!);
  // A device, FIFO, socket, folder or link there is refused before the password is asked.
  if (checkOutputPath(file) !== null && inv.values.force !== true)
    throw new StashError('FILE_EXISTS', `${file} already exists; add --force to replace it`);
  if (!existsSync(dirname(file)))
    throw new StashError(
      'FILE_NOT_FOUND',
      `the folder ${dirname(file)} does not exist (create it first); nothing was written`,
    );
  const session = new Session(inv.values);
  try {
    const vaultKey = await session.vaultKey();
    try {
      const bytes = buildBackup(session.dir, readVaultInfo(session.dir).vaultId, vaultKey);
      writeUserFile(file, [bytes]); // 0600: ciphertext, but nobody else's business
      const { manifest } = parseBackup(bytes);
      const containers = manifest.files.filter((f) => f.path.startsWith('containers/')).length + manifest.links.length;
      out(
        `Backed up the vault at ${session.dir} to ${file} (${formatBytes(bytes.length)}: ${manifest.files.length} files, ${containers} container${containers === 1 ? '' : 's'}, ${manifest.links.length} linked).`,
      );
      out('Everything in it stays encrypted: restoring it needs the vault password (stash vault restore FILE).');
      return 0;
    } finally {
      wipe(vaultKey);
    }
  } finally {
    session.close();
  }
}

/** Writes the backup's vault files into `dir` (folders 0700, files 0600). */
function extract(contents: BackupContents, dir: string): void {
  for (const [path, bytes] of contents.files) {
    const target = join(dir, ...path.split('/'));
    mkdirSync(dirname(target), { recursive: true, mode: 0o700 });
    writeFileSync(target, bytes, { mode: 0o600, flag: 'wx' });
  }
}

/**
 * Puts each linked shared file back where it was, when nothing is there now;
 * one already there is kept (it may be newer: a git pull brings the rest);
 * where its folder is gone, the container becomes a copy inside the vault.
 */
function restoreLinks(contents: BackupContents, dir: string): string[] {
  const notes: string[] = [];
  for (const link of contents.manifest.links) {
    const bytes = contents.links.get(link.name)!;
    // Whatever holds the name now (a link, a device too) is left alone.
    if (lstatSync(link.path, { throwIfNoEntry: false })) {
      notes.push(`${link.name}: kept the file already at ${link.path}`);
    } else if (existsSync(dirname(link.path)) && statSync(dirname(link.path)).isDirectory()) {
      writeUserFile(link.path, [bytes], { shared: true });
      notes.push(`${link.name}: wrote its linked file back to ${link.path}`);
    } else {
      const record = readRecord(dir, link.name);
      if (!record) continue;
      mkdirSync(join(dir, 'containers'), { recursive: true, mode: 0o700 });
      writeFileSync(join(dir, 'containers', `${link.name}.stash`), bytes, { mode: 0o600 });
      writeRecord(dir, { ...record, link: null });
      notes.push(
        `${link.name}: ${dirname(link.path)} does not exist, so it is now a copy in the vault (stash container link PATH to link it again)`,
      );
    }
  }
  return notes;
}

/** Opens every container of the restored vault; throws (naming it) when one does not open. */
async function checkContainers(dir: string, vaultKey: Buffer): Promise<number> {
  let n = 0;
  for (const c of listContainers(dir)) {
    if (c.problem)
      throw new StashError(
        'VAULT_CORRUPT',
        `the restored container ${c.name} cannot be used: ${c.problem}; nothing was restored`,
      );
    let key: Buffer;
    if (c.shared) {
      const { openSharedKey } = await import('../container-access.js');
      key = await openSharedKey(dir, vaultKey, c.name);
      const { readSharedEntries } = await import('../../vault/sharing/index.js');
      wipeEntries(readSharedEntries(dir, c.name, key));
    } else {
      key = unwrapContentKey(dir, vaultKey, c.name);
      wipeEntries(readEntries(dir, c.name, key));
    }
    wipe(key);
    n++;
  }
  return n;
}

async function restore(inv: Invocation): Promise<number> {
  const file = resolve(inv.positionals[0]!);
  const target = resolve(typeof inv.values.into === 'string' ? inv.values.into : defaultVaultDir());
  const force = inv.values.force === true;
  if (vaultExists(target) && !force) {
    throw new StashError(
      'VAULT_EXISTS',
      `a vault already exists at ${target}; restore elsewhere with --into DIR, or add --force to replace it (it is moved aside, not deleted)`,
    );
  }
  if (existsSync(target) && !vaultExists(target) && !force)
    throw new StashError('FILE_EXISTS', `${target} exists and is not a vault; choose another folder with --into DIR`);
  const bytes = readBounded(
    file,
    MAX_BACKUP_BYTES,
    () => new VaultError('VAULT_CORRUPT', `${file} is not a regular file of at most ${MAX_BACKUP_BYTES} bytes`),
  );
  if (bytes === null) throw new StashError('FILE_NOT_FOUND', `${file} does not exist`);
  const contents = parseBackup(bytes);
  mkdirSync(dirname(target), { recursive: true, mode: 0o700 });
  const staging = `${target}.restore-${randomBytes(6).toString('hex')}`;
  mkdirSync(staging, { mode: 0o700 });
  const session = new Session(inv.values, { dir: staging });
  try {
    extract(contents, staging); // a private folder; nothing takes the target's place before every check below
    // The backup's own password (the one of the day it was made), never a cached key.
    const vaultKey = await session.vaultKeyFromPassword({ keyring: false });
    try {
      verifyBackup(bytes, vaultKey);
      const notes = restoreLinks(contents, staging);
      const containers = await checkContainers(staging, vaultKey);
      let aside: string | null = null;
      if (existsSync(target)) {
        aside = `${target}.before-restore-${new Date().toISOString().replace(/[:.]/g, '-')}`;
        renameSync(target, aside);
      }
      renameSync(staging, target);
      out(
        `Restored the vault of ${contents.manifest.createdAt} to ${target}: ${containers} container${containers === 1 ? '' : 's'}, every one opened with the password.`,
      );
      for (const line of notes) out(`  ${line}`);
      if (aside) note(`The vault that was at ${target} is now at ${aside}; delete it when you no longer need it.`);
      return 0;
    } finally {
      wipe(vaultKey);
    }
  } finally {
    session.close();
    rmSync(staging, { recursive: true, force: true });
  }
}
