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
 * hyphens) back. See docs/vault.md for why this length and alphabet.
 */
import { VaultError } from './errors.js';
import { blake2b, constantTimeEqual } from './secure.js';

export const FINGERPRINT_BYTES = 15;
export const FINGERPRINT_CHARS = 24;
const GROUP = 4;
const ALPHABET = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';
const DOMAIN = Buffer.from('stash-identity-fingerprint-v1\0', 'latin1');

/** The 15-byte fingerprint of an identity's two public keys. */
export function fingerprintOf(x25519: Buffer, ed25519: Buffer): Buffer {
  if (!Buffer.isBuffer(x25519) || x25519.length !== 32 || !Buffer.isBuffer(ed25519) || ed25519.length !== 32) {
    throw new VaultError('BAD_PUBLIC_KEY', 'a fingerprint needs a 32-byte X25519 and a 32-byte Ed25519 public key');
  }
  return Buffer.from(blake2b(32, Buffer.concat([DOMAIN, x25519, ed25519])).subarray(0, FINGERPRINT_BYTES));
}

/** "XXXX-XXXX-XXXX-XXXX-XXXX-XXXX" for a 15-byte fingerprint. */
export function formatFingerprint(b: Buffer): string {
  if (!Buffer.isBuffer(b) || b.length !== FINGERPRINT_BYTES) {
    throw new VaultError('BAD_FINGERPRINT', `a fingerprint is ${FINGERPRINT_BYTES} bytes`);
  }
  let out = '';
  let acc = 0;
  let bits = 0;
  for (const byte of b) {
    acc = (acc << 8) | byte;
    bits += 8;
    while (bits >= 5) {
      bits -= 5;
      out += ALPHABET[(acc >> bits) & 31];
    }
    acc &= (1 << bits) - 1;
  }
  // 15 bytes = 120 bits = exactly 24 characters: no partial group, no padding.
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
  const chars = s.replace(/[\s\-\u2010-\u2015\u2212]/g, '').toUpperCase().replace(/[IL]/g, '1').replace(/O/g, '0');
  for (const c of chars) {
    if (!ALPHABET.includes(c)) {
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
  let acc = 0;
  let bits = 0;
  let o = 0;
  for (const c of chars) {
    acc = (acc << 5) | ALPHABET.indexOf(c);
    bits += 5;
    if (bits >= 8) {
      bits -= 8;
      out[o++] = (acc >> bits) & 0xff;
      acc &= (1 << bits) - 1;
    }
  }
  return out;
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
