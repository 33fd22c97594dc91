/**
 * Validation of what a publisher sends: stash's identity public key and an
 * email address. The address is later passed as an argument to the
 * verification mail command, so the rules are deliberately narrower than
 * RFC 5322: ASCII only, no quoting, no whitespace or control characters, no
 * leading '-', a plain dot-separated host name.
 */
import sodiumModule from 'sodium-native';
import { MalformedRequestError } from './errors.js';

/** The two calls used here are missing from the shared sodium-native typings. */
const sodium = sodiumModule as typeof sodiumModule & {
  crypto_core_ed25519_is_valid_point(p: Buffer): boolean;
  crypto_scalarmult(q: Buffer, n: Buffer, p: Buffer): void;
};

/** True when the little-endian u-coordinate is canonical (< 2^255 - 19). */
function x25519Canonical(pk: Buffer): boolean {
  if ((pk[31]! & 0x80) !== 0) return false;
  if (pk[31] !== 0x7f) return true;
  for (let i = 30; i >= 1; i--) if (pk[i] !== 0xff) return true;
  return pk[0]! < 0xed;
}

/** Identity public key: type byte 0x01, X25519 (32 bytes), Ed25519 (32 bytes). */
export const PUBLIC_KEY_TYPE = 0x01;
export const PUBLIC_KEY_LENGTH = 65;

function badKey(message: string): MalformedRequestError {
  return new MalformedRequestError(message, 'INVALID_PUBLIC_KEY');
}

/**
 * Checks type and length, refuses all-zero halves, an Ed25519 half that is not
 * a valid prime-order point, and an X25519 half of small order (a shared
 * secret with it would be all zeros).
 */
export function validatePublicKey(key: Uint8Array): Buffer {
  if (key.length !== PUBLIC_KEY_LENGTH) {
    throw badKey(`the public key must be ${PUBLIC_KEY_LENGTH} bytes (type 0x01, X25519, Ed25519), got ${key.length}`);
  }
  if (key[0] !== PUBLIC_KEY_TYPE) throw badKey(`unsupported public key type 0x${key[0]!.toString(16).padStart(2, '0')} (expected 0x01)`);
  const buf = Buffer.from(key);
  const x25519 = buf.subarray(1, 33);
  const ed25519 = buf.subarray(33, 65);
  if (x25519.every((b) => b === 0) || ed25519.every((b) => b === 0)) throw badKey('the public key is all zeros');
  if (!x25519Canonical(x25519)) throw badKey('the X25519 part of the public key is not canonically encoded');
  if (!sodium.crypto_core_ed25519_is_valid_point(ed25519)) throw badKey('the Ed25519 part of the public key is not a valid point');
  const scalar = Buffer.alloc(32);
  const out = Buffer.alloc(32);
  sodium.randombytes_buf(scalar);
  try {
    // libsodium refuses (throws) when the result is all zeros: a small-order point.
    sodium.crypto_scalarmult(out, scalar, x25519);
  } catch {
    throw badKey('the X25519 part of the public key is a small-order point');
  } finally {
    sodium.sodium_memzero(scalar);
  }
  return buf;
}

function badEmail(message: string): MalformedRequestError {
  return new MalformedRequestError(message, 'INVALID_EMAIL');
}

const localPart = /^[A-Za-z0-9_%+=-]+(\.[A-Za-z0-9_%+=-]+)*$/;
const label = /^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$/;

/**
 * Returns the address with its domain in lower case (the local part is kept:
 * it may be case-sensitive). Messages never echo the address back.
 */
export function validateEmail(input: string): string {
  if (typeof input !== 'string' || input.length === 0) throw badEmail('the email address is empty');
  if (input.length > 254) throw badEmail('the email address is longer than 254 characters');
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u0020\u007f]/.test(input)) throw badEmail('the email address contains whitespace or control characters');
  if (/[^\u0021-\u007e]/.test(input)) throw badEmail('the email address must be ASCII (write an international domain in its xn-- form)');
  if (input.startsWith('-')) throw badEmail('the email address must not start with "-"');
  const at = input.lastIndexOf('@');
  if (at <= 0 || input.indexOf('@') !== at) throw badEmail('the email address must have the form local@domain');
  const local = input.slice(0, at);
  const domain = input.slice(at + 1);
  if (local.length > 64) throw badEmail('the part before @ is longer than 64 characters');
  if (!localPart.test(local)) throw badEmail('the part before @ may hold letters, digits and . _ % + = - (no leading, trailing or double dots)');
  const labels = domain.split('.');
  if (domain.length === 0 || labels.length < 2) throw badEmail('the domain must have at least two labels, like example.org');
  for (const l of labels) {
    if (!label.test(l)) throw badEmail('a domain label is empty, too long, or holds characters other than letters, digits and inner hyphens');
  }
  if (/^[0-9]+$/.test(labels[labels.length - 1]!)) throw badEmail('the domain must be a host name, not an IP address');
  return `${local}@${domain.toLowerCase()}`;
}

/**
 * The mailbox an address delivers to, for the per-address mail limit: the
 * local part up to its first `+` (sub-addressing: `victim+1@`, `victim+2@`
 * reach the same mailbox at most providers) and, like the domain, compared
 * in lower case (nearly every mail system delivers regardless of case).
 * Takes an address validateEmail accepted.
 */
export function mailboxKey(email: string): string {
  const at = email.lastIndexOf('@');
  const local = email.slice(0, at);
  const plus = local.indexOf('+');
  return `${plus === -1 ? local : local.slice(0, plus)}@${email.slice(at + 1)}`.toLowerCase();
}

/** `a***@example.org`: enough to recognise one's own address, not to harvest it. */
export function maskEmail(email: string): string {
  const at = email.lastIndexOf('@');
  const local = email.slice(0, at);
  return `${local.slice(0, 1)}***${email.slice(at)}`;
}
