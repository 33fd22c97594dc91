/**
 * The recovery key: 256 random bits that wrap the vault key a second time in
 * vault.json, so a forgotten password does not lose the vault. It is shown
 * once, for writing down, as 13 groups of 4 Crockford base32 characters
 * (the 256 bits and 4 zero bits) and a 14th group of 4 that is a checksum
 * (the first 20 bits of BLAKE2b of the key), so a mistyped group is caught
 * before anything is tried. Being random and full-length, it needs no
 * Argon2id: the wrapping key is BLAKE2b-256 keyed by it (docs/vault.md).
 *
 * Anyone holding it can read the vault: it is as strong as a password
 * that cannot be guessed, and as weak as the paper it is written on.
 */
import { open, seal } from './aead.js';
import {
  CROCKFORD_ALPHABET as ALPHABET,
  decodeCrockfordInto,
  encodeCrockford,
  normaliseCrockford,
} from './crockford.js';
import { VaultError } from './errors.js';
import { withVaultLock } from './lock.js';
import { loadMeta, requireVaultKey } from './meta-file.js';
import { blake2b, constantTimeEqual, KEY_BYTES, secureAlloc, secureRandom, wipe } from './secure.js';
import { keyCheckOf, type RecoveryWrap, type VaultMeta } from './vault-meta.js';
import { writeMeta } from './vault.js';

const GROUPS = 13;
const DOMAIN = Buffer.from('stash-recovery-key\0', 'latin1');

function wrapKeyOf(recovery: Buffer): Buffer {
  return blake2b(32, DOMAIN, recovery);
}

function ad(m: Pick<VaultMeta, 'vaultId'>, createdAt: string): Buffer {
  return Buffer.concat([DOMAIN, m.vaultId, Buffer.from(createdAt, 'utf8')]);
}

function checksum(key: Buffer): number {
  const h = blake2b(32, Buffer.concat([DOMAIN, key]));
  return (h[0]! << 12) | (h[1]! << 4) | (h[2]! >> 4);
}

/** 52 base32 characters of the 256 bits (and 4 zero bits), then 4 of the checksum, in groups of 4. */
export function formatRecoveryKey(key: Buffer): string {
  let text = encodeCrockford(key);
  const sum = checksum(key);
  for (let shift = 15; shift >= 0; shift -= 5) text += ALPHABET[(sum >>> shift) & 31];
  return text.match(/.{4}/g)!.join('-');
}

/**
 * Reads a typed recovery key back into secure memory: case, spaces and
 * dashes do not matter, O reads as 0 and I or L as 1 (Crockford). A wrong
 * length or a checksum that does not match is INVALID_RECOVERY_KEY.
 */
export function parseRecoveryKey(text: string): Buffer {
  const clean = normaliseCrockford(text);
  const bad = (why: string) => new VaultError('INVALID_RECOVERY_KEY', `that is not a valid recovery key: ${why}`);
  if (clean.length !== (GROUPS + 1) * 4)
    throw bad(`it has ${clean.length} characters, a recovery key has ${(GROUPS + 1) * 4} (14 groups of 4)`);
  const key = secureAlloc(KEY_BYTES);
  const badAt = decodeCrockfordInto(clean.slice(0, GROUPS * 4), key);
  if (badAt >= 0) {
    wipe(key);
    throw bad(`${JSON.stringify(String.fromCodePoint(clean.codePointAt(badAt)!))} is not one of its characters`);
  }
  let sum = 0;
  for (const c of clean.slice(GROUPS * 4)) sum = (sum << 5) | ALPHABET.indexOf(c);
  if (sum < 0 || sum !== checksum(key)) {
    wipe(key);
    throw bad('its checksum does not match, so a group was mistyped; check each group against what you wrote down');
  }
  return key;
}

/** Creates (or replaces) the vault's recovery key; returns it (release with wipe()). */
export function createRecoveryKey(dir: string, vaultKey: Buffer, now = new Date()): Buffer {
  const recovery = secureRandom(KEY_BYTES);
  const wrapKey = wrapKeyOf(recovery);
  try {
    withVaultLock(dir, () => {
      const meta = requireVaultKey(dir, vaultKey);
      const createdAt = now.toISOString();
      const { nonce, ciphertext } = seal(vaultKey, ad(meta, createdAt), wrapKey);
      writeMeta(dir, { ...meta, recovery: { createdAt, nonce, wrapped: ciphertext } });
    });
    return recovery;
  } catch (err) {
    wipe(recovery);
    throw err;
  } finally {
    wipe(wrapKey);
  }
}

/** Removes the recovery key (needs the vault key, so a stranger cannot). */
export function removeRecoveryKey(dir: string, vaultKey: Buffer): boolean {
  return withVaultLock(dir, () => {
    const meta = requireVaultKey(dir, vaultKey);
    if (!meta.recovery) return false;
    const { recovery: _dropped, ...rest } = meta;
    writeMeta(dir, rest);
    return true;
  });
}

/** When the vault's recovery key was made, or null when it has none. */
export function recoveryKeyStatus(dir: string): { createdAt: string } | null {
  const r: RecoveryWrap | undefined = loadMeta(dir).recovery;
  return r ? { createdAt: r.createdAt } : null;
}

/** The vault key from the recovery key (release with wipe()); WRONG_RECOVERY_KEY when it does not open this vault. */
export function unlockWithRecoveryKey(dir: string, recovery: Buffer): Buffer {
  const meta = loadMeta(dir);
  if (!meta.recovery) throw new VaultError('NO_RECOVERY_KEY', `the vault at ${dir} has no recovery key`);
  const wrapKey = wrapKeyOf(recovery);
  let key: Buffer | null;
  try {
    key = open(meta.recovery.wrapped, ad(meta, meta.recovery.createdAt), meta.recovery.nonce, wrapKey);
  } finally {
    wipe(wrapKey);
  }
  if (key === null)
    throw new VaultError(
      'WRONG_RECOVERY_KEY',
      `that recovery key does not open the vault at ${dir} (it may be an older one, replaced since)`,
    );
  if (key.length !== KEY_BYTES || !constantTimeEqual(keyCheckOf(key, meta.vaultId), meta.keyCheck)) {
    wipe(key);
    throw new VaultError(
      'VAULT_CORRUPT',
      `the recovery key of the vault at ${dir} unwraps a key that is not the vault key`,
    );
  }
  return key;
}
