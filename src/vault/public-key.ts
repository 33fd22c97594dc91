/**
 * The public half of an identity as published to the key server:
 *
 *   byte 0       type tag 0x01 = "stash identity, X25519 + Ed25519"
 *   bytes 1..32  X25519 public key (encryption / key agreement)
 *   bytes 33..64 Ed25519 public key (signatures)
 *
 * 65 bytes. The decoder is strict: exact length, known tag, and both keys must
 * be valid, canonical, non-low-order curve points, because a low-order X25519
 * key would make every shared secret with it predictable.
 */
import { VaultError } from './errors.js';
import { randomBytes } from './secure.js';
import { sodium } from './sodium.js';

export const PUBLIC_KEY_TAG = 0x01;
export const PUBLIC_KEY_BYTES = 65;

export interface PublicKeys {
  x25519: Buffer;
  ed25519: Buffer;
}

/** True when the little-endian u-coordinate is canonical (< 2^255 - 19). */
function x25519Canonical(pk: Buffer): boolean {
  if ((pk[31]! & 0x80) !== 0) return false;
  if (pk[31] !== 0x7f) return true;
  for (let i = 30; i >= 1; i--) if (pk[i] !== 0xff) return true;
  return pk[0]! < 0xed;
}

/** Null when both keys are usable, else what is wrong with them. */
export function publicKeysProblem(k: { x25519: unknown; ed25519: unknown }): string | null {
  if (!Buffer.isBuffer(k.x25519) || k.x25519.length !== 32) return 'the X25519 key is not 32 bytes';
  if (!Buffer.isBuffer(k.ed25519) || k.ed25519.length !== 32) return 'the Ed25519 key is not 32 bytes';
  if (!x25519Canonical(k.x25519)) return 'the X25519 key is not canonically encoded';
  try {
    // libsodium refuses low-order points (and an all-zero result) here.
    sodium().crypto_scalarmult(Buffer.alloc(32), randomBytes(32), k.x25519);
  } catch {
    return 'the X25519 key is a low-order point';
  }
  if (!sodium().crypto_core_ed25519_is_valid_point(k.ed25519)) return 'the Ed25519 key is not a valid curve point';
  return null;
}

/** The 65 published bytes of an identity's public keys. */
export function encodePublicKey(id: PublicKeys): Buffer {
  const problem = publicKeysProblem(id);
  if (problem) throw new VaultError('BAD_PUBLIC_KEY', `cannot encode the public key: ${problem}`);
  return Buffer.concat([Buffer.from([PUBLIC_KEY_TAG]), id.x25519, id.ed25519]);
}

/** Decodes 65 published bytes; anything else is BAD_PUBLIC_KEY. Returns copies. */
export function decodePublicKey(b: Uint8Array): PublicKeys {
  if (!(b instanceof Uint8Array)) throw new VaultError('BAD_PUBLIC_KEY', 'a public key must be bytes');
  if (b.length !== PUBLIC_KEY_BYTES) {
    throw new VaultError('BAD_PUBLIC_KEY', `a stash public key is ${PUBLIC_KEY_BYTES} bytes; got ${b.length}`);
  }
  if (b[0] !== PUBLIC_KEY_TAG) {
    throw new VaultError(
      'BAD_PUBLIC_KEY',
      `unknown public key type 0x${b[0]!.toString(16).padStart(2, '0')} (expected 0x01)`,
    );
  }
  const keys = { x25519: Buffer.from(b.subarray(1, 33)), ed25519: Buffer.from(b.subarray(33, 65)) };
  const problem = publicKeysProblem(keys);
  if (problem) throw new VaultError('BAD_PUBLIC_KEY', `invalid public key: ${problem}`);
  return keys;
}
