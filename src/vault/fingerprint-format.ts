/**
 * The pure half of identity fingerprints (src/vault/fingerprint.ts): what is
 * hashed, and how the 15 bytes are written and read as 24 Crockford base32
 * characters in 6 groups of 4. No hashing and no libsodium here, so the key
 * server's verification page can show a fingerprint formatted exactly as
 * `stash vault identity show` prints it, hashing with its own libsodium.
 */
import { CROCKFORD_ALPHABET, decodeCrockfordInto, encodeCrockford, normaliseCrockford } from './crockford.js';
import { VaultError } from './errors.js';

export const FINGERPRINT_BYTES = 15;
export const FINGERPRINT_CHARS = 24;
const GROUP = 4;
const DOMAIN = Buffer.from('stash-identity-fingerprint-v1\0', 'latin1');

/**
 * What is hashed (BLAKE2b-256, the first 15 bytes kept) into the fingerprint
 * of an identity: the domain string, then the X25519 and Ed25519 keys.
 */
export function fingerprintInput(x25519: Uint8Array, ed25519: Uint8Array): Buffer {
  if (
    !(x25519 instanceof Uint8Array) ||
    x25519.length !== 32 ||
    !(ed25519 instanceof Uint8Array) ||
    ed25519.length !== 32
  ) {
    throw new VaultError('BAD_PUBLIC_KEY', 'a fingerprint needs a 32-byte X25519 and a 32-byte Ed25519 public key');
  }
  return Buffer.concat([DOMAIN, x25519, ed25519]);
}

/** "XXXX-XXXX-XXXX-XXXX-XXXX-XXXX" for a 15-byte fingerprint. */
export function formatFingerprint(b: Buffer): string {
  if (!Buffer.isBuffer(b) || b.length !== FINGERPRINT_BYTES) {
    throw new VaultError('BAD_FINGERPRINT', `a fingerprint is ${FINGERPRINT_BYTES} bytes`);
  }
  // 15 bytes = 120 bits = exactly 24 characters: no partial group, no padding.
  const out = encodeCrockford(b);
  return out.match(/.{4}/g)!.join('-');
}

/**
 * Reads a fingerprint typed by a person: case, spaces and hyphens do not
 * matter, and I/L read as 1, O as 0. Anything else is BAD_FINGERPRINT with a
 * message that says what was wrong.
 */
export function parseFingerprint(s: string): Buffer {
  if (typeof s !== 'string') throw new VaultError('BAD_FINGERPRINT', 'a fingerprint must be text');
  if (s.length > 200) throw new VaultError('BAD_FINGERPRINT', 'that is far too long for a fingerprint');
  const chars = normaliseCrockford(s);
  for (const c of chars) {
    if (!CROCKFORD_ALPHABET.includes(c)) {
      const hint = c === 'U' ? ' (U is never used in fingerprints; check that character)' : '';
      throw new VaultError('BAD_FINGERPRINT', `${JSON.stringify(c)} cannot appear in a fingerprint${hint}`);
    }
  }
  if (chars.length !== FINGERPRINT_CHARS) {
    throw new VaultError(
      'BAD_FINGERPRINT',
      `a fingerprint has ${FINGERPRINT_CHARS} characters (6 groups of ${GROUP}); this one has ${chars.length}`,
    );
  }
  const out = Buffer.alloc(FINGERPRINT_BYTES);
  decodeCrockfordInto(chars, out);
  return out;
}
