/**
 * `stash vault init`: a new vault with a new password (asked twice on a
 * terminal). STASH_KDF=test selects libsodium's minimum Argon2id cost; it
 * exists so that test suites run in seconds and must never be used for a real
 * vault.
 */
import { UsageError } from '../../errors.js';
import { defaultVaultDir, identityPublic, initVault, vaultExists, VaultError, wipe, type KdfPreset } from '../../vault/index.js';
import { formatBytes, out, warn } from '../output.js';
import { passwordSource, readNewPassword } from '../password.js';
import type { Invocation } from '../registry.js';

/**
 * The Argon2id preset from --kdf, else (for init only) STASH_KDF, whose 'test'
 * value is for test suites; undefined = the library default (or, for passwd,
 * the vault's current cost).
 */
export function kdfChoice(values: Invocation['values'], env: NodeJS.ProcessEnv | null = process.env): KdfPreset | undefined {
  const flag = values.kdf;
  if (typeof flag === 'string') {
    if (flag !== 'moderate' && flag !== 'interactive') throw new UsageError(`--kdf must be moderate or interactive, got ${JSON.stringify(flag)}`);
    return flag;
  }
  const fromEnv = env?.STASH_KDF;
  if (fromEnv === undefined || fromEnv === '') return undefined;
  if (fromEnv !== 'test' && fromEnv !== 'moderate' && fromEnv !== 'interactive') {
    throw new UsageError(`STASH_KDF must be moderate, interactive or test, got ${JSON.stringify(fromEnv)}`);
  }
  if (fromEnv === 'test') warn('STASH_KDF=test: minimum Argon2id cost, for test suites only; do not keep secrets in this vault');
  return fromEnv;
}

export async function run(inv: Invocation): Promise<number> {
  const dir = defaultVaultDir();
  // Checked before asking for a password twice; initVault checks again under its lock.
  if (vaultExists(dir)) throw new VaultError('VAULT_EXISTS', `a vault already exists at ${dir}`);
  const kdf = kdfChoice(inv.values);
  const password = await readNewPassword(passwordSource(inv.values), null);
  try {
    const info = await initVault(dir, password, kdf === undefined ? {} : { kdf });
    const id = identityPublic(dir);
    out(`Created a vault at ${dir}`);
    out(`Vault id:    ${info.vaultId}`);
    out(`Fingerprint: ${id.fingerprint}`);
    out(`Argon2id:    ${info.kdf.opslimit} pass(es), ${formatBytes(info.kdf.memlimit)}`);
    return 0;
  } finally {
    wipe(password);
  }
}
