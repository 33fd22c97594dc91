// Types for the parts of sodium-native 5 that stash uses (the package ships none).
// Shared by every module: add what you need here, keep signatures exact.
declare module 'sodium-native' {
  type Buf = Buffer;

  export function sodium_malloc(size: number): Buf & { secure: true };
  export function sodium_free(buf: Buf): void;
  export function sodium_is_zero(buf: Buf | Uint8Array, length?: number): boolean;
  export function sodium_memzero(buf: Buf | Uint8Array): void;
  export function sodium_memcmp(a: Buf, b: Buf): boolean;
  export function sodium_mlock(buf: Buf): void;
  export function sodium_munlock(buf: Buf): void;
  export function sodium_mprotect_noaccess(buf: Buf): void;
  export function sodium_mprotect_readonly(buf: Buf): void;
  export function sodium_mprotect_readwrite(buf: Buf): void;
  export function randombytes_buf(buf: Buf | Uint8Array): void;

  export const crypto_kx_PUBLICKEYBYTES: number;
  export const crypto_kx_SECRETKEYBYTES: number;
  export const crypto_kx_SESSIONKEYBYTES: number;
  export function crypto_kx_keypair(pk: Buf, sk: Buf): void;
  export function crypto_kx_seed_keypair(pk: Buf, sk: Buf, seed: Buf): void;
  export function crypto_kx_client_session_keys(
    rx: Buf | null,
    tx: Buf | null,
    clientPk: Buf,
    clientSk: Buf,
    serverPk: Buf,
  ): void;
  export function crypto_kx_server_session_keys(
    rx: Buf | null,
    tx: Buf | null,
    serverPk: Buf,
    serverSk: Buf,
    clientPk: Buf,
  ): void;

  export const crypto_aead_chacha20poly1305_ietf_ABYTES: number;
  export const crypto_aead_chacha20poly1305_ietf_KEYBYTES: number;
  export const crypto_aead_chacha20poly1305_ietf_NPUBBYTES: number;
  export function crypto_aead_chacha20poly1305_ietf_encrypt(
    c: Buf,
    m: Buf,
    ad: Buf | null,
    nsec: null,
    npub: Buf,
    k: Buf,
  ): number;
  export function crypto_aead_chacha20poly1305_ietf_decrypt(
    m: Buf,
    nsec: null,
    c: Buf,
    ad: Buf | null,
    npub: Buf,
    k: Buf,
  ): number;

  export const crypto_aead_xchacha20poly1305_ietf_ABYTES: number;
  export const crypto_aead_xchacha20poly1305_ietf_KEYBYTES: number;
  export const crypto_aead_xchacha20poly1305_ietf_NPUBBYTES: number;
  export function crypto_aead_xchacha20poly1305_ietf_encrypt(
    c: Buf,
    m: Buf,
    ad: Buf | null,
    nsec: null,
    npub: Buf,
    k: Buf,
  ): number;
  export function crypto_aead_xchacha20poly1305_ietf_decrypt(
    m: Buf,
    nsec: null,
    c: Buf,
    ad: Buf | null,
    npub: Buf,
    k: Buf,
  ): number;

  export const crypto_pwhash_SALTBYTES: number;
  export const crypto_pwhash_ALG_ARGON2ID13: number;
  export const crypto_pwhash_OPSLIMIT_INTERACTIVE: number;
  export const crypto_pwhash_MEMLIMIT_INTERACTIVE: number;
  export const crypto_pwhash_OPSLIMIT_MODERATE: number;
  export const crypto_pwhash_MEMLIMIT_MODERATE: number;
  export const crypto_pwhash_OPSLIMIT_SENSITIVE: number;
  export const crypto_pwhash_MEMLIMIT_SENSITIVE: number;
  export const crypto_pwhash_OPSLIMIT_MIN: number;
  export const crypto_pwhash_MEMLIMIT_MIN: number;
  export const crypto_pwhash_BYTES_MIN: number;
  export function crypto_pwhash(
    out: Buf,
    passwd: Buf,
    salt: Buf,
    opslimit: number,
    memlimit: number,
    alg: number,
  ): void;
  export function crypto_pwhash_async(
    out: Buf,
    passwd: Buf,
    salt: Buf,
    opslimit: number,
    memlimit: number,
    alg: number,
  ): Promise<void>;

  export const crypto_box_PUBLICKEYBYTES: number;
  export const crypto_box_SECRETKEYBYTES: number;
  export function crypto_box_keypair(pk: Buf, sk: Buf): void;

  export const crypto_sign_PUBLICKEYBYTES: number;
  export const crypto_sign_SECRETKEYBYTES: number;
  export const crypto_sign_BYTES: number;
  export function crypto_sign_keypair(pk: Buf, sk: Buf): void;
  export function crypto_sign_detached(sig: Buf, m: Buf, sk: Buf): void;
  export function crypto_sign_verify_detached(sig: Buf, m: Buf, pk: Buf): boolean;

  export const crypto_generichash_BYTES: number;
  export const crypto_generichash_BYTES_MIN: number;
  export const crypto_generichash_BYTES_MAX: number;
  export const crypto_generichash_KEYBYTES: number;
  export function crypto_generichash(out: Buf, input: Buf, key?: Buf): void;
  export function crypto_generichash_batch(out: Buf, inputs: Buf[], key?: Buf): void;

  export const crypto_hash_sha256_BYTES: number;
  export function crypto_hash_sha256(out: Buf, input: Buf | Uint8Array): void;

  export const crypto_secretbox_KEYBYTES: number;
  export const crypto_secretbox_NONCEBYTES: number;
  export const crypto_secretbox_MACBYTES: number;
  export function crypto_secretbox_easy(c: Buf, m: Buf, n: Buf, k: Buf): void;
  export function crypto_secretbox_open_easy(m: Buf, c: Buf, n: Buf, k: Buf): boolean;

  export const crypto_scalarmult_BYTES: number;
  export function crypto_scalarmult_base(q: Buf, n: Buf): void;
  export function crypto_scalarmult(q: Buf, n: Buf, p: Buf): void;
  export function crypto_core_ed25519_is_valid_point(p: Buf): boolean;
}
