/**
 * Creating, unlocking and re-keying a vault. The password never encrypts data
 * directly: Argon2id turns it into a master key, which only wraps the random
 * 32-byte vault key. Changing the password therefore rewrites vault.json alone,
 * and everything else (identity, contacts, container keys) stays as it is.
 */
import { existsSync, readdirSync } from 'node:fs';
import { writeContacts } from './contacts.js';
import { VaultError } from './errors.js';
import { atomicWrite, ensureDir, restrictDir } from './fs-atomic.js';
import { createIdentity } from './identity.js';
import { assertPassword, deriveMasterKey, kdfPreset, type KdfParams, type KdfPreset } from './kdf.js';
import { withVaultLock } from './lock.js';
import { loadMeta, requireVaultKey } from './meta-file.js';
import { CONTAINER_EXT, vaultExists, vaultPaths } from './paths.js';
import { constantTimeEqual, KEY_BYTES, randomBytes, secureRandom, wipe } from './secure.js';
import {
  encodeMeta,
  ID_BYTES,
  keyCheckOf,
  metaInfo,
  SALT_BYTES,
  unwrapVaultKey,
  VAULT_FORMAT_VERSION,
  wrapVaultKey,
  type VaultInfo,
  type VaultMeta,
} from './vault-meta.js';

export type { VaultInfo } from './vault-meta.js';

export interface KdfOptions {
  /** Argon2id cost preset; see kdf.ts. 'test' is for test suites only. */
  kdf?: KdfPreset;
}

/** Parts of a vault without vault.json: a crashed init, or a vault whose vault.json was lost. */
function leftovers(dir: string): string[] {
  const p = vaultPaths(dir);
  const found = [p.identity, p.contacts].filter((f) => existsSync(f));
  try {
    if (readdirSync(p.containers).some((n) => n.endsWith(CONTAINER_EXT))) found.push(p.containers);
  } catch {
    // No containers folder: nothing there.
  }
  return found;
}

export function writeMeta(dir: string, meta: VaultMeta): void {
  atomicWrite(vaultPaths(dir).meta, [Buffer.from(encodeMeta(meta), 'utf8')]);
}

/**
 * Creates a vault in `dir` (created 0700 if needed): a random vault key wrapped
 * by `password`, a new identity, an empty contact list and a containers folder.
 * vault.json is written last, so a crash part-way never leaves something that
 * looks like a vault. Refuses (VAULT_EXISTS) a folder that already has a vault
 * or pieces of one. The password buffer is not modified.
 */
export async function initVault(dir: string, password: Buffer, opts: KdfOptions = {}): Promise<VaultInfo> {
  const { info, vaultKey } = await createVault(dir, password, opts);
  wipe(vaultKey);
  return info;
}

/**
 * initVault that also hands back the new vault key (a secure buffer the
 * caller releases with wipe()), so `stash vault init` can cache it in the
 * agent without a second Argon2id run.
 */
export async function createVault(
  dir: string,
  password: Buffer,
  opts: KdfOptions = {},
): Promise<{ info: VaultInfo; vaultKey: Buffer }> {
  assertPassword(password);
  const params = kdfPreset(opts.kdf);
  if (vaultExists(dir)) throw new VaultError('VAULT_EXISTS', `a vault already exists at ${dir}`);
  const parts = leftovers(dir);
  if (parts.length > 0) {
    throw new VaultError(
      'VAULT_EXISTS',
      `${dir} holds parts of a vault but no vault.json (${parts.join(', ')}); move them away before creating a new vault there`,
    );
  }
  ensureDir(dir);
  restrictDir(dir);
  const salt = randomBytes(SALT_BYTES);
  const master = await deriveMasterKey(password, salt, params);
  const vaultKey = secureRandom(KEY_BYTES);
  try {
    return withVaultLock(dir, () => {
      // Checked again under the lock: another `stash init` may have won the race.
      if (vaultExists(dir) || leftovers(dir).length > 0)
        throw new VaultError('VAULT_EXISTS', `a vault was just created at ${dir} by another process`);
      const vaultId = randomBytes(ID_BYTES);
      createIdentity(dir, vaultId, vaultKey);
      writeContacts(dir, vaultId, vaultKey, []);
      const containers = vaultPaths(dir).containers;
      ensureDir(containers);
      restrictDir(containers);
      const meta = wrapVaultKey(
        { formatVersion: VAULT_FORMAT_VERSION, vaultId, createdAt: new Date().toISOString(), kdf: { ...params, salt } },
        vaultKey,
        master,
      );
      writeMeta(dir, meta);
      return { info: metaInfo(meta), vaultKey };
    });
  } catch (err) {
    wipe(vaultKey);
    throw err;
  } finally {
    wipe(master);
  }
}

/** Format version, vault id, KDF parameters and creation time; needs no password. */
export function readVaultInfo(dir: string): VaultInfo {
  return metaInfo(loadMeta(dir));
}

/**
 * Derives the master key from `password` and unwraps the vault key into a
 * secure buffer, which the caller releases with wipe(). WRONG_PASSWORD when the
 * password does not open the vault. Reads only; nothing is written.
 */
export async function unlockVault(dir: string, password: Buffer): Promise<Buffer> {
  assertPassword(password);
  const meta = loadMeta(dir);
  const master = await deriveMasterKey(password, meta.kdf.salt, meta.kdf);
  let vaultKey: Buffer | null;
  try {
    vaultKey = unwrapVaultKey(meta, master);
  } finally {
    wipe(master);
  }
  if (vaultKey === null) throw new VaultError('WRONG_PASSWORD', `wrong password for the vault at ${dir}`);
  if (!constantTimeEqual(keyCheckOf(vaultKey, meta.vaultId), meta.keyCheck)) {
    wipe(vaultKey);
    throw new VaultError(
      'VAULT_CORRUPT',
      `${vaultPaths(dir).meta} is inconsistent: its key check does not match the vault key`,
    );
  }
  return vaultKey;
}

/**
 * Re-wraps the vault key under `newPassword` with a fresh salt. The KDF cost
 * stays as it was unless `opts.kdf` names a preset (this is how it is raised).
 * VAULT_KEY_MISMATCH (nothing written) when `vaultKey` is not this vault's key.
 */
export async function changePassword(
  dir: string,
  vaultKey: Buffer,
  newPassword: Buffer,
  opts: KdfOptions = {},
): Promise<void> {
  assertPassword(newPassword);
  const before = requireVaultKey(dir, vaultKey);
  const params: KdfParams =
    opts.kdf === undefined
      ? { alg: before.kdf.alg, opslimit: before.kdf.opslimit, memlimit: before.kdf.memlimit }
      : kdfPreset(opts.kdf);
  const salt = randomBytes(SALT_BYTES);
  const master = await deriveMasterKey(newPassword, salt, params);
  try {
    withVaultLock(dir, () => {
      // The KDF ran outside the lock; make sure vault.json is still the one we checked.
      const now = requireVaultKey(dir, vaultKey);
      if (!now.vaultId.equals(before.vaultId))
        throw new VaultError('VAULT_KEY_MISMATCH', `the vault at ${dir} was replaced during the password change`);
      writeMeta(
        dir,
        wrapVaultKey(
          {
            formatVersion: now.formatVersion,
            vaultId: now.vaultId,
            createdAt: now.createdAt,
            kdf: { ...params, salt },
            ...(now.recovery ? { recovery: now.recovery } : {}),
          },
          vaultKey,
          master,
        ),
      );
    });
  } finally {
    wipe(master);
  }
}

/**
 * Checks that a vault key obtained without the password (e.g. from the session
 * agent) is this vault's key. Throws VAULT_KEY_MISMATCH when it is not, and
 * VAULT_NOT_FOUND / VAULT_CORRUPT for a missing or damaged vault.json.
 */
export function verifyVaultKey(dir: string, vaultKey: Buffer): void {
  requireVaultKey(dir, vaultKey);
}
