/**
 * `stash vault init`: a new vault with a new password (asked twice on a
 * terminal). STASH_KDF=test selects libsodium's minimum Argon2id cost; it
 * exists so that test suites run in seconds and must never be used for a real
 * vault.
 */
import { UsageError } from '../../errors.js';
import { DEFAULT_TTL_SECONDS } from '../../protocol/limits.js';
import {
  createVault,
  defaultVaultDir,
  identityPublic,
  vaultExists,
  VaultError,
  wipe,
  type KdfPreset,
} from '../../vault/index.js';
import { formatBytes, formatDuration, out, outJson, warn } from '../output.js';
import { createRecoveryKey, formatRecoveryKey } from '../../vault/recovery-key.js';
import { recoveryKeyLines } from './vault-recovery.js';
import { readNewPassword } from '../password.js';
import { weakAllowed } from '../password-strength.js';
import type { Invocation } from '../command-types.js';
import { Session } from '../session.js';

/**
 * The Argon2id preset from --kdf, else (for init only) STASH_KDF, whose 'test'
 * value is for test suites; undefined = the library default (or, for passwd,
 * the vault's current cost).
 */
export function kdfChoice(
  values: Invocation['values'],
  env: NodeJS.ProcessEnv | null = process.env,
): KdfPreset | undefined {
  const flag = values.kdf;
  if (typeof flag === 'string') {
    if (flag !== 'moderate' && flag !== 'interactive')
      throw new UsageError(`--kdf must be moderate or interactive, got ${JSON.stringify(flag)}`);
    return flag;
  }
  const fromEnv = env?.STASH_KDF;
  if (fromEnv === undefined || fromEnv === '') return undefined;
  if (fromEnv !== 'test' && fromEnv !== 'moderate' && fromEnv !== 'interactive') {
    throw new UsageError(`STASH_KDF must be moderate, interactive or test, got ${JSON.stringify(fromEnv)}`);
  }
  if (fromEnv === 'test')
    warn('STASH_KDF=test: minimum Argon2id cost, for test suites only; do not keep secrets in this vault');
  return fromEnv;
}

/**
 * Creates the vault, then caches its key in the agent as the first command of
 * a session would (so `stash container create` next asks nothing), and says
 * what to do next.
 */
export async function run(inv: Invocation): Promise<number> {
  const dir = defaultVaultDir();
  // Checked before asking for a password twice; createVault checks again under its lock.
  if (vaultExists(dir)) throw new VaultError('VAULT_EXISTS', `a vault already exists at ${dir}`);
  const kdf = kdfChoice(inv.values);
  if (inv.values['recovery-key'] === true && inv.values['no-recovery-key'] === true)
    throw new UsageError('--recovery-key and --no-recovery-key contradict each other');
  const session = new Session(inv.values, { dir });
  try {
    const password = await readNewPassword(
      session.source,
      null,
      undefined,
      weakAllowed(inv.values['allow-weak-password']),
    );
    let created: Awaited<ReturnType<typeof createVault>>;
    try {
      // An `unlock` activity while Argon2id runs, as for every unlock.
      created = await session.withActivity('unlock', process.pid, () =>
        createVault(dir, password, kdf === undefined ? {} : { kdf }),
      );
    } finally {
      wipe(password);
    }
    const { info, vaultKey } = created;
    let cached: boolean;
    let recovery: Buffer | null = null;
    try {
      cached = await session.cache(Buffer.from(info.vaultId, 'hex'), vaultKey, dir);
      // Made only when asked for: a key printed where nobody writes it down is a second password lying around.
      if (inv.values['recovery-key'] === true) recovery = createRecoveryKey(dir, vaultKey);
    } finally {
      wipe(vaultKey);
    }
    const id = identityPublic(dir);
    if (inv.values.json === true) {
      outJson({
        vault: dir,
        vaultId: info.vaultId,
        fingerprint: id.fingerprint,
        kdf: info.kdf,
        unlocked: cached,
        recoveryKey: recovery ? formatRecoveryKey(recovery) : null,
      });
      wipe(recovery);
      return 0;
    }
    out(`Created a vault at ${dir}`);
    out(`Vault id:    ${info.vaultId}`);
    out(`Fingerprint: ${id.fingerprint}`);
    out(`Argon2id:    ${info.kdf.opslimit} pass(es), ${formatBytes(info.kdf.memlimit)}`);
    if (cached) {
      const ttl = formatDuration((session.ttl ?? DEFAULT_TTL_SECONDS) * 1000);
      out(
        `Unlocked:    the session agent keeps the vault key for ${ttl} after its last use (stash vault sessions lock-all forgets it)`,
      );
    }
    out('');
    if (recovery) {
      for (const line of recoveryKeyLines(recovery)) out(line);
      wipe(recovery);
    } else {
      out(
        'No recovery key: a forgotten password loses this vault. Make one to write down: stash vault recovery-key create',
      );
    }
    out('');
    out('Next: create a container with `stash container create NAME`.');
    return 0;
  } finally {
    session.close();
  }
}
