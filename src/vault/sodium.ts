/**
 * The slice of sodium-native 5 that the vault uses, with types (the package
 * ships none). Loaded on first use so that importing the vault module, e.g. for
 * defaultVaultDir() in `stash --help`, does not load the native library.
 * Names and argument orders were checked against node_modules/sodium-native/index.js.
 */
import { loadSodium } from '../native/sodium.js';

export interface SecureBuffer extends Buffer {
  secure?: boolean;
}

export interface Sodium {
  sodium_malloc(size: number): SecureBuffer;
  sodium_free(buf: Buffer): void;
  sodium_memzero(buf: ArrayBufferView): void;
  sodium_memcmp(a: ArrayBufferView, b: ArrayBufferView): boolean;
  sodium_is_zero(buf: ArrayBufferView, length?: number): boolean;
  /** Returns the padded length; `buf` must have room for it. */
  sodium_pad(buf: Buffer, unpaddedLength: number, blockSize: number): number;
  /** Returns the unpadded length; throws on bad padding. */
  sodium_unpad(buf: Buffer, paddedLength: number, blockSize: number): number;
  randombytes_buf(buf: ArrayBufferView): void;
  /** Uniform in [0, upper): libsodium rejects the values that would bias a modulo. */
  randombytes_uniform(upper: number): number;

  crypto_pwhash_async(
    out: Buffer,
    passwd: Buffer,
    salt: Buffer,
    opslimit: number,
    memlimit: number,
    alg: number,
  ): Promise<void>;
  crypto_pwhash_ALG_ARGON2ID13: number;
  crypto_pwhash_SALTBYTES: number;
  crypto_pwhash_OPSLIMIT_MIN: number;
  crypto_pwhash_MEMLIMIT_MIN: number;
  crypto_pwhash_OPSLIMIT_INTERACTIVE: number;
  crypto_pwhash_MEMLIMIT_INTERACTIVE: number;
  crypto_pwhash_OPSLIMIT_MODERATE: number;
  crypto_pwhash_MEMLIMIT_MODERATE: number;

  /** Returns the ciphertext length. */
  crypto_aead_xchacha20poly1305_ietf_encrypt(
    c: Buffer,
    m: Buffer,
    ad: Buffer | null,
    nsec: null,
    npub: Buffer,
    k: Buffer,
  ): number;
  /** Returns the plaintext length; throws Error('could not verify data') on a bad tag. */
  crypto_aead_xchacha20poly1305_ietf_decrypt(
    m: Buffer,
    nsec: null,
    c: Buffer,
    ad: Buffer | null,
    npub: Buffer,
    k: Buffer,
  ): number;
  crypto_aead_xchacha20poly1305_ietf_ABYTES: number;
  crypto_aead_xchacha20poly1305_ietf_NPUBBYTES: number;
  crypto_aead_xchacha20poly1305_ietf_KEYBYTES: number;

  crypto_generichash(out: Buffer, input: Buffer, key?: Buffer): void;

  crypto_box_keypair(pk: Buffer, sk: Buffer): void;
  crypto_sign_keypair(pk: Buffer, sk: Buffer): void;
  crypto_sign_ed25519_sk_to_pk(pk: Buffer, sk: Buffer): void;
  crypto_scalarmult_base(q: Buffer, n: Buffer): void;
  /** Throws when the result is the all-zero point (a low-order input). */
  crypto_scalarmult(q: Buffer, n: Buffer, p: Buffer): void;
  crypto_core_ed25519_is_valid_point(p: Buffer): boolean;

  /** c must be m.length + 48 bytes. */
  crypto_box_seal(c: Buffer, m: Buffer, pk: Buffer): void;
  /** False when `c` was not sealed to this key pair (or was modified). */
  crypto_box_seal_open(m: Buffer, c: Buffer, pk: Buffer, sk: Buffer): boolean;
  crypto_sign_detached(sig: Buffer, m: Buffer, sk: Buffer): void;
  crypto_sign_verify_detached(sig: Buffer, m: Buffer, pk: Buffer): boolean;
}

let loaded: Sodium | undefined;

/** sodium-native, loaded on first call. */
export function sodium(): Sodium {
  loaded ??= loadSodium() as unknown as Sodium;
  return loaded;
}
