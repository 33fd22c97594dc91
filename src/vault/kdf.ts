/**
 * Password -> master key, with Argon2id (libsodium crypto_pwhash, version 1.3).
 * The parameters are stored in vault.json beside a per-vault random salt, so
 * they can be raised later (changePassword with a stronger preset) without
 * touching anything but vault.json.
 */
import { VaultError } from './errors.js';
import { KEY_BYTES, secureAlloc, wipe } from './secure.js';
import { sodium } from './sodium.js';

export type KdfPreset = 'interactive' | 'moderate' | 'test';
export const KDF_ALG = 'argon2id13';

export interface KdfParams {
  alg: typeof KDF_ALG;
  opslimit: number;
  memlimit: number;
}

/**
 * The default for new vaults. 'moderate' (3 passes over 256 MiB, under a second
 * on a laptop) rather than 'interactive' (2 passes, 64 MiB): the password is
 * asked once per session, since the agent caches keys afterwards, and a stolen
 * vault.json is attacked offline where every extra cost per guess counts.
 */
export const DEFAULT_KDF: KdfPreset = 'moderate';

/**
 * Largest parameters accepted from vault.json. A tampered file could otherwise
 * make unlock allocate terabytes or spin for hours; no real preset comes close.
 */
export const MAX_OPSLIMIT = 64;
export const MAX_MEMLIMIT = 4 * 1024 * 1024 * 1024;

/** The parameters of a preset; 'test' is libsodium's minimum and is only for test suites. */
export function kdfPreset(preset: KdfPreset = DEFAULT_KDF): KdfParams {
  const s = sodium();
  switch (preset) {
    case 'interactive':
      return {
        alg: KDF_ALG,
        opslimit: s.crypto_pwhash_OPSLIMIT_INTERACTIVE,
        memlimit: s.crypto_pwhash_MEMLIMIT_INTERACTIVE,
      };
    case 'moderate':
      return { alg: KDF_ALG, opslimit: s.crypto_pwhash_OPSLIMIT_MODERATE, memlimit: s.crypto_pwhash_MEMLIMIT_MODERATE };
    case 'test':
      return { alg: KDF_ALG, opslimit: s.crypto_pwhash_OPSLIMIT_MIN, memlimit: s.crypto_pwhash_MEMLIMIT_MIN };
    default:
      throw new VaultError(
        'INVALID_ARGUMENT',
        `unknown KDF preset ${JSON.stringify(preset)}: use interactive, moderate or test`,
      );
  }
}

/** Null when the parameters are usable, else a reason. */
export function kdfParamsProblem(p: { opslimit: unknown; memlimit: unknown }): string | null {
  const s = sodium();
  if (typeof p.opslimit !== 'number' || !Number.isInteger(p.opslimit)) return 'opslimit is not an integer';
  if (typeof p.memlimit !== 'number' || !Number.isInteger(p.memlimit)) return 'memlimit is not an integer';
  if (p.opslimit < s.crypto_pwhash_OPSLIMIT_MIN || p.opslimit > MAX_OPSLIMIT) {
    return `opslimit ${p.opslimit} is outside ${s.crypto_pwhash_OPSLIMIT_MIN}..${MAX_OPSLIMIT}`;
  }
  if (p.memlimit < s.crypto_pwhash_MEMLIMIT_MIN || p.memlimit > MAX_MEMLIMIT) {
    return `memlimit ${p.memlimit} is outside ${s.crypto_pwhash_MEMLIMIT_MIN}..${MAX_MEMLIMIT}`;
  }
  return null;
}

/** Throws INVALID_PASSWORD unless `password` is a non-empty Buffer. */
export function assertPassword(password: unknown): asserts password is Buffer {
  if (!Buffer.isBuffer(password)) throw new VaultError('INVALID_PASSWORD', 'the password must be given as a Buffer');
  if (password.length === 0) throw new VaultError('INVALID_PASSWORD', 'the password is empty');
}

/**
 * Derives the 32-byte master key into a secure buffer. Runs on the libuv thread
 * pool, so the event loop (and, in the agent, IPC) keeps going meanwhile. The
 * password buffer is read, never modified; zeroing it is the caller's job.
 */
export async function deriveMasterKey(password: Buffer, salt: Buffer, params: KdfParams): Promise<Buffer> {
  const out = secureAlloc(KEY_BYTES);
  try {
    await sodium().crypto_pwhash_async(
      out,
      password,
      salt,
      params.opslimit,
      params.memlimit,
      sodium().crypto_pwhash_ALG_ARGON2ID13,
    );
  } catch (err) {
    wipe(out);
    // libsodium fails here only when it cannot allocate memlimit bytes.
    throw new VaultError(
      'VAULT_IO',
      `password key derivation failed (Argon2id with ${params.memlimit} bytes of memory)`,
      { cause: err },
    );
  }
  return out;
}
