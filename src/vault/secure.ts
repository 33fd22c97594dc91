/**
 * Secure-memory helpers. Every key the vault handles (master key, vault key,
 * content keys, identity secret keys) and every decrypted container body lives
 * in a sodium_malloc buffer: guard pages, mlock'ed (not swapped), and zeroed
 * here when dropped instead of waiting for the garbage collector.
 */
import { keySlots } from '../native/key-slots.js';
import { securePool } from '../native/secure-pool.js';
import { VaultError } from './errors.js';
import { sodium, type SecureBuffer } from './sodium.js';

/** Length of the vault key, content keys and AEAD keys. */
export const KEY_BYTES = 32;

/** A zero-filled secure buffer of `size` bytes (`.secure === true`). */
export function secureAlloc(size: number): SecureBuffer {
  // sodium_malloc(0) returns a pointer we cannot use; callers never need one.
  const buf = sodium().sodium_malloc(Math.max(1, size));
  const view = size === buf.length ? buf : (buf.subarray(0, size) as SecureBuffer);
  view.secure = true;
  sodium().sodium_memzero(view);
  return view;
}

/** A secure buffer of `size` random bytes. */
export function secureRandom(size: number): SecureBuffer {
  const buf = secureAlloc(size);
  sodium().randombytes_buf(buf);
  return buf;
}

/** A secure copy of `src` (for key bytes that arrived in ordinary memory). */
export function secureCopy(src: Uint8Array): SecureBuffer {
  const buf = secureAlloc(src.length);
  buf.set(src);
  return buf;
}

/** Ordinary (non-secret) random bytes: ids, nonces, salts. */
export function randomBytes(size: number): Buffer {
  const buf = Buffer.alloc(size);
  sodium().randombytes_buf(buf);
  return buf;
}

/**
 * Zeroes a buffer and, when it came from sodium_malloc, frees it. After this the
 * buffer has length 0 (its memory is detached), so a late use reads nothing
 * instead of stale key bytes. A key from the agent client's get() is a slot of
 * its key pool instead, and the protocol's keys and plaintexts are views of the
 * secure pool: zeroed and given back (native/key-slots.ts, native/secure-pool.ts).
 * Safe to call twice and on undefined.
 */
export function wipe(buf: Buffer | null | undefined): void {
  if (!buf || keySlots.release(buf) || securePool.release(buf)) return;
  if (buf.length > 0) sodium().sodium_memzero(buf);
  // sodium_free detaches the whole backing allocation (a no-op when already freed).
  if ((buf as SecureBuffer).secure === true) sodium().sodium_free(buf);
}

/** Constant-time equality for equal-length buffers; false when lengths differ. */
export function constantTimeEqual(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  return sodium().sodium_memcmp(a, b);
}

/** Throws INVALID_ARGUMENT unless `key` is a 32-byte Buffer. */
export function assertKey(key: unknown, what: string): asserts key is Buffer {
  if (!Buffer.isBuffer(key) || key.length !== KEY_BYTES) {
    const got = Buffer.isBuffer(key) ? `${key.length} bytes` : typeof key;
    throw new VaultError('INVALID_ARGUMENT', `${what} must be a ${KEY_BYTES}-byte buffer (got ${got})`);
  }
}

/** BLAKE2b with a chosen output length (16..64) and optional key (16..64 bytes). */
export function blake2b(outLength: number, input: Buffer, key?: Buffer): Buffer {
  const out = Buffer.alloc(outLength);
  if (key === undefined) sodium().crypto_generichash(out, input);
  else sodium().crypto_generichash(out, input, key);
  return out;
}
