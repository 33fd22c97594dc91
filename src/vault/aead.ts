/**
 * XChaCha20-Poly1305 (IETF) with random 24-byte nonces: large enough that
 * random nonces never repeat in practice, so no nonce counter has to be kept on
 * disk. Thin wrappers that turn libsodium's exceptions into null.
 */
import { KEY_BYTES, randomBytes, secureAlloc, wipe } from './secure.js';
import { sodium } from './sodium.js';

export const NONCE_BYTES = 24;
export const TAG_BYTES = 16;

/** Encrypts `plain` under `key` with a fresh nonce; the ciphertext carries the 16-byte tag. */
export function seal(plain: Buffer, ad: Buffer, key: Buffer): { nonce: Buffer; ciphertext: Buffer } {
  const nonce = randomBytes(NONCE_BYTES);
  return { nonce, ciphertext: sealWithNonce(plain, ad, nonce, key) };
}

/** Encrypts with a caller-chosen nonce (the caller just drew it at random). */
export function sealWithNonce(plain: Buffer, ad: Buffer, nonce: Buffer, key: Buffer): Buffer {
  if (key.length !== KEY_BYTES) throw new RangeError('AEAD key must be 32 bytes');
  const ciphertext = Buffer.alloc(plain.length + TAG_BYTES);
  sodium().crypto_aead_xchacha20poly1305_ietf_encrypt(ciphertext, plain, ad, null, nonce, key);
  return ciphertext;
}

/**
 * Decrypts into a new secure buffer, or returns null when the tag does not
 * verify (wrong key, or any changed byte of ciphertext, nonce or AD).
 */
export function open(ciphertext: Buffer, ad: Buffer, nonce: Buffer, key: Buffer): Buffer | null {
  if (ciphertext.length < TAG_BYTES || nonce.length !== NONCE_BYTES || key.length !== KEY_BYTES) return null;
  const plain = secureAlloc(ciphertext.length - TAG_BYTES);
  try {
    sodium().crypto_aead_xchacha20poly1305_ietf_decrypt(plain, null, ciphertext, ad, nonce, key);
    return plain;
  } catch {
    wipe(plain);
    return null;
  }
}
