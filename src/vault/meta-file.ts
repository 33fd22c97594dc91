/**
 * Loading vault.json and checking a vault key against it. Shared by every
 * operation that needs the vault to exist or a vault key to be the right one.
 */
import { VaultError } from './errors.js';
import { readBounded } from './fs-atomic.js';
import { vaultPaths } from './paths.js';
import { assertKey, constantTimeEqual } from './secure.js';
import { decodeMeta, keyCheckOf, MAX_META_BYTES, type VaultMeta } from './vault-meta.js';

/** Reads and parses vault.json; VAULT_NOT_FOUND when absent, VAULT_CORRUPT when damaged. */
export function loadMeta(dir: string): VaultMeta {
  const path = vaultPaths(dir).meta;
  const bytes = readBounded(
    path,
    MAX_META_BYTES,
    (size) =>
      new VaultError(
        'VAULT_CORRUPT',
        size < 0
          ? `${path} is not a regular file`
          : `${path} is damaged: ${size} bytes is far too large for a vault file`,
      ),
  );
  if (bytes === null)
    throw new VaultError('VAULT_NOT_FOUND', `no vault at ${dir} (${path} does not exist); create one first`);
  return decodeMeta(bytes, path);
}

/**
 * Loads vault.json and checks that `vaultKey` is this vault's key. Throws
 * VAULT_KEY_MISMATCH when it is not (a stale key from the agent, or a key of
 * another vault); nothing may be written with such a key.
 */
export function requireVaultKey(dir: string, vaultKey: Buffer): VaultMeta {
  assertKey(vaultKey, 'the vault key');
  const meta = loadMeta(dir);
  if (!constantTimeEqual(keyCheckOf(vaultKey, meta.vaultId), meta.keyCheck)) {
    throw new VaultError(
      'VAULT_KEY_MISMATCH',
      `the vault key does not open the vault at ${dir}; unlock it again with the password`,
    );
  }
  return meta;
}
