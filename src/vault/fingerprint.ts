/**
 * Identity fingerprints: what two people compare over an independent channel
 * (a phone call) before trusting a key that came through the key server.
 *
 * fingerprint = first 15 bytes of BLAKE2b-256("stash-identity-fingerprint-v1\0" || X25519 pk || Ed25519 pk)
 *
 * 120 bits, written as 24 Crockford base32 characters in 6 groups of 4:
 * "7K3M-9QXT-4B2N-H8RW-ZC5D-1FGJ". Crockford's alphabet leaves out I, L, O and U,
 * so nothing that is read aloud or typed is ambiguous, and the parser maps the
 * usual slips (I/L -> 1, O -> 0, lower case, missing or extra spaces and
 * hyphens) back. See docs/vault.md for why this length and alphabet. The
 * formatting and parsing live in fingerprint-format.ts (no libsodium).
 */
import { VaultError } from './errors.js';
import { FINGERPRINT_BYTES, fingerprintInput, parseFingerprint } from './fingerprint-format.js';
import { blake2b, constantTimeEqual } from './secure.js';

export {
  FINGERPRINT_BYTES,
  FINGERPRINT_CHARS,
  fingerprintInput,
  formatFingerprint,
  parseFingerprint,
} from './fingerprint-format.js';

/** The 15-byte fingerprint of an identity's two public keys. */
export function fingerprintOf(x25519: Buffer, ed25519: Buffer): Buffer {
  if (!Buffer.isBuffer(x25519) || !Buffer.isBuffer(ed25519)) {
    throw new VaultError('BAD_PUBLIC_KEY', 'a fingerprint needs a 32-byte X25519 and a 32-byte Ed25519 public key');
  }
  return Buffer.from(blake2b(32, fingerprintInput(x25519, ed25519)).subarray(0, FINGERPRINT_BYTES));
}

/** A fingerprint given as bytes or as text (parsed as above). */
export type FingerprintLike = Buffer | string;

function toBytes(f: FingerprintLike): Buffer {
  return typeof f === 'string' ? parseFingerprint(f) : f;
}

/**
 * Constant-time comparison of two fingerprints, each bytes or text. Text that
 * is not a fingerprint at all throws BAD_FINGERPRINT rather than returning
 * false, so a garbled entry is reported as such and not as "a different key".
 */
export function fingerprintsEqual(a: FingerprintLike, b: FingerprintLike): boolean {
  const x = toBytes(a);
  const y = toBytes(b);
  if (x.length !== FINGERPRINT_BYTES || y.length !== FINGERPRINT_BYTES) return false;
  return constantTimeEqual(x, y);
}
