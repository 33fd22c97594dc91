/**
 * vault.json: the only vault file readable without a key. It holds the format
 * version, the vault id, the KDF parameters with their salt, and the vault key
 * wrapped (XChaCha20-Poly1305) by the master key derived from the password.
 * Every header field is bound into the wrap as associated data, so none can be
 * changed without unlock failing. Encoding and parsing only; no file I/O.
 */
import { VaultError } from './errors.js';
import { KDF_ALG, kdfParamsProblem, type KdfParams } from './kdf.js';
import { NONCE_BYTES, open, seal, TAG_BYTES } from './aead.js';
import { blake2b, KEY_BYTES, wipe } from './secure.js';

export const VAULT_FORMAT = 'stash-vault';
export const VAULT_FORMAT_VERSION = 1;
export const WRAP_ALG = 'xchacha20poly1305-ietf';
export const ID_BYTES = 16;
export const SALT_BYTES = 16;
/** vault.json is a few hundred bytes; anything far larger is not ours. */
export const MAX_META_BYTES = 16 * 1024;

export interface VaultMeta {
  formatVersion: number;
  vaultId: Buffer;
  createdAt: string;
  kdf: KdfParams & { salt: Buffer };
  nonce: Buffer;
  wrappedKey: Buffer;
  keyCheck: Buffer;
  /** The vault key wrapped a second time, by a key derived from the recovery key (recovery-key.ts); absent without one. */
  recovery?: RecoveryWrap;
}

export interface RecoveryWrap {
  createdAt: string;
  nonce: Buffer;
  wrapped: Buffer;
}

/** Public facts about a vault, readable without the password. */
export interface VaultInfo {
  vaultId: string;
  formatVersion: number;
  kdf: KdfParams;
  createdAt: string;
}

export function metaInfo(m: VaultMeta): VaultInfo {
  return {
    vaultId: m.vaultId.toString('hex'),
    formatVersion: m.formatVersion,
    kdf: { alg: m.kdf.alg, opslimit: m.kdf.opslimit, memlimit: m.kdf.memlimit },
    createdAt: m.createdAt,
  };
}

const WRAP_DOMAIN = Buffer.from('stash-vault-key\0', 'latin1');
const CHECK_DOMAIN = Buffer.from('stash-vault-key-check\0', 'latin1');

/** The associated data of the vault-key wrap: a canonical binary form of the header. */
export function wrapAd(m: Pick<VaultMeta, 'formatVersion' | 'vaultId' | 'createdAt' | 'kdf'>): Buffer {
  const fixed = Buffer.alloc(2 + ID_BYTES + 1 + 4 + 8 + SALT_BYTES);
  let o = fixed.writeUInt16LE(m.formatVersion, 0);
  o += m.vaultId.copy(fixed, o);
  o = fixed.writeUInt8(2 /* Argon2id 1.3 */, o);
  o = fixed.writeUInt32LE(m.kdf.opslimit, o);
  o = fixed.writeBigUInt64LE(BigInt(m.kdf.memlimit), o);
  m.kdf.salt.copy(fixed, o);
  const created = Buffer.from(m.createdAt, 'utf8');
  return Buffer.concat([WRAP_DOMAIN, fixed, Buffer.from([created.length]), created]);
}

/**
 * A keyed hash of the vault id under the vault key. Lets verifyVaultKey() tell
 * whether a key cached elsewhere (the agent) belongs to this vault, without the
 * password and without revealing anything about the key.
 */
export function keyCheckOf(vaultKey: Buffer, vaultId: Buffer): Buffer {
  return blake2b(32, Buffer.concat([CHECK_DOMAIN, vaultId]), vaultKey);
}

/**
 * An unkeyed checksum over everything else. It is not a security control (the
 * AEAD is): it tells accidental damage (VAULT_CORRUPT) apart from a wrong
 * password, which the AEAD alone cannot.
 */
function checksumOf(m: VaultMeta): Buffer {
  // A vault without a recovery key sums exactly as before the recovery key existed.
  const recovery = m.recovery ? [Buffer.from(m.recovery.createdAt, 'utf8'), m.recovery.nonce, m.recovery.wrapped] : [];
  return blake2b(16, Buffer.concat([wrapAd(m), m.nonce, m.wrappedKey, m.keyCheck, ...recovery]));
}

/** Wraps `vaultKey` under `masterKey` with a fresh nonce. */
export function wrapVaultKey(
  header: Omit<VaultMeta, 'nonce' | 'wrappedKey' | 'keyCheck'>,
  vaultKey: Buffer,
  masterKey: Buffer,
): VaultMeta {
  const { nonce, ciphertext } = seal(vaultKey, wrapAd(header), masterKey);
  return { ...header, nonce, wrappedKey: ciphertext, keyCheck: keyCheckOf(vaultKey, header.vaultId) };
}

/** The vault key in a secure buffer, or null when `masterKey` does not open the wrap. */
export function unwrapVaultKey(m: VaultMeta, masterKey: Buffer): Buffer | null {
  const key = open(m.wrappedKey, wrapAd(m), m.nonce, masterKey);
  if (key !== null && key.length !== KEY_BYTES) {
    wipe(key);
    return null;
  }
  return key;
}

/** vault.json text. */
export function encodeMeta(m: VaultMeta): string {
  const doc = {
    format: VAULT_FORMAT,
    formatVersion: m.formatVersion,
    vaultId: m.vaultId.toString('hex'),
    createdAt: m.createdAt,
    kdf: { alg: m.kdf.alg, opslimit: m.kdf.opslimit, memlimit: m.kdf.memlimit, salt: m.kdf.salt.toString('hex') },
    vaultKey: { alg: WRAP_ALG, nonce: m.nonce.toString('hex'), wrapped: m.wrappedKey.toString('hex') },
    keyCheck: m.keyCheck.toString('hex'),
    ...(m.recovery
      ? {
          recoveryKey: {
            alg: WRAP_ALG,
            createdAt: m.recovery.createdAt,
            nonce: m.recovery.nonce.toString('hex'),
            wrapped: m.recovery.wrapped.toString('hex'),
          },
        }
      : {}),
    checksum: checksumOf(m).toString('hex'),
  };
  return `${JSON.stringify(doc, null, 2)}\n`;
}

/** Parses vault.json strictly; any problem is VAULT_CORRUPT naming `path`. */
export function decodeMeta(text: Buffer, path: string): VaultMeta {
  const bad = (why: string) => new VaultError('VAULT_CORRUPT', `${path} is damaged: ${why}`);
  let doc: unknown;
  try {
    doc = JSON.parse(text.toString('utf8'));
  } catch {
    throw bad('not valid JSON');
  }
  const obj = (v: unknown, what: string): Record<string, unknown> => {
    if (typeof v !== 'object' || v === null || Array.isArray(v)) throw bad(`${what} is not an object`);
    return v as Record<string, unknown>;
  };
  const hex = (v: unknown, bytes: number, what: string): Buffer => {
    if (typeof v !== 'string' || v.length !== bytes * 2 || !/^[0-9a-f]+$/.test(v))
      throw bad(`${what} is not ${bytes} bytes of lowercase hex`);
    return Buffer.from(v, 'hex');
  };
  const d = obj(doc, 'the file');
  if (d.format !== VAULT_FORMAT) throw bad(`not a stash vault file (format ${JSON.stringify(d.format)})`);
  if (d.formatVersion !== VAULT_FORMAT_VERSION) {
    throw bad(
      `unsupported format version ${JSON.stringify(d.formatVersion)} (this stash reads version ${VAULT_FORMAT_VERSION}; a newer stash may have written it)`,
    );
  }
  const kdf = obj(d.kdf, 'kdf');
  if (kdf.alg !== KDF_ALG) throw bad(`unknown KDF ${JSON.stringify(kdf.alg)}`);
  const problem = kdfParamsProblem({ opslimit: kdf.opslimit, memlimit: kdf.memlimit });
  if (problem) throw bad(`KDF parameters out of range: ${problem}`);
  const vk = obj(d.vaultKey, 'vaultKey');
  if (vk.alg !== WRAP_ALG) throw bad(`unknown key wrap ${JSON.stringify(vk.alg)}`);
  if (typeof d.createdAt !== 'string' || d.createdAt.length > 64 || Number.isNaN(Date.parse(d.createdAt)))
    throw bad('createdAt is not a date');
  const m: VaultMeta = {
    formatVersion: VAULT_FORMAT_VERSION,
    vaultId: hex(d.vaultId, ID_BYTES, 'vaultId'),
    createdAt: d.createdAt,
    kdf: {
      alg: KDF_ALG,
      opslimit: kdf.opslimit as number,
      memlimit: kdf.memlimit as number,
      salt: hex(kdf.salt, SALT_BYTES, 'kdf.salt'),
    },
    nonce: hex(vk.nonce, NONCE_BYTES, 'vaultKey.nonce'),
    wrappedKey: hex(vk.wrapped, KEY_BYTES + TAG_BYTES, 'vaultKey.wrapped'),
    keyCheck: hex(d.keyCheck, 32, 'keyCheck'),
  };
  if (d.recoveryKey !== undefined) {
    const rk = obj(d.recoveryKey, 'recoveryKey');
    if (rk.alg !== WRAP_ALG) throw bad(`unknown recovery key wrap ${JSON.stringify(rk.alg)}`);
    if (typeof rk.createdAt !== 'string' || rk.createdAt.length > 64 || Number.isNaN(Date.parse(rk.createdAt)))
      throw bad('recoveryKey.createdAt is not a date');
    m.recovery = {
      createdAt: rk.createdAt,
      nonce: hex(rk.nonce, NONCE_BYTES, 'recoveryKey.nonce'),
      wrapped: hex(rk.wrapped, KEY_BYTES + TAG_BYTES, 'recoveryKey.wrapped'),
    };
  }
  if (!checksumOf(m).equals(hex(d.checksum, 16, 'checksum')))
    throw bad('checksum mismatch (the file was changed or damaged)');
  return m;
}
