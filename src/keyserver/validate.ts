/**
 * Validation of what a publisher sends: stash's identity public key and an
 * email address. The address is later passed as an argument to the
 * verification mail command, so the rules are deliberately narrower than
 * RFC 5322: ASCII only, no quoting, no whitespace or control characters, no
 * leading '-', a plain dot-separated host name.
 */
import sodiumModule from 'sodium-native';
import { MalformedRequestError } from './errors.js';

/** The call used here is missing from the shared sodium-native typings. */
const sodium = sodiumModule as typeof sodiumModule & {
  crypto_core_ed25519_is_valid_point(p: Buffer): boolean;
};

/** True when the little-endian u-coordinate is canonical (< 2^255 - 19). */
function x25519Canonical(pk: Buffer): boolean {
  if ((pk[31]! & 0x80) !== 0) return false;
  if (pk[31] !== 0x7f) return true;
  for (let i = 30; i >= 1; i--) if (pk[i] !== 0xff) return true;
  return pk[0]! < 0xed;
}

/**
 * Every canonical X25519 u-coordinate of small order, on the curve or its
 * twist: libsodium's own list (`has_small_order` in
 * crypto_scalarmult/curve25519/ref10/x25519_ref10.c, which crypto_scalarmult
 * checks before multiplying), less p and p + 1 and the forms with the top bit
 * set, which are not canonical and refused before this list is read. A
 * scalar multiplication by a clamped scalar (a multiple of 8) gives zero for
 * exactly these points, so comparing is as strict as multiplying, at a
 * fraction of the cost (test/keyserver/validate.test.ts checks both agree).
 */
export const SMALL_ORDER_X25519: readonly Buffer[] = [
  '0000000000000000000000000000000000000000000000000000000000000000', // 0 (order 4)
  '0100000000000000000000000000000000000000000000000000000000000000', // 1 (order 1)
  'e0eb7a7c3b41b8ae1656e3faf19fc46ada098deb9c32b1fd866205165f49b800', // order 8
  '5f9c95bca3508c24b1d0b1559c83ef5b04445cc4581c8e86d8224eddd09f1157', // order 8
  'ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f', // p - 1 (order 2)
].map((hex) => Buffer.from(hex, 'hex'));

function smallOrder(x25519: Buffer): boolean {
  for (const p of SMALL_ORDER_X25519) if (x25519.equals(p)) return true;
  return false;
}

/**
 * Ed25519 halves that passed the point check, so that a key published again
 * (one identity shares with many people) is checked once: the check is a
 * multiplication by the group order, the dearest part of a publish. Only
 * keys that passed are kept, oldest dropped first; a key is public, so
 * keeping it costs nothing but memory (about 100 bytes each).
 */
const VALID_ED25519_KEPT = 1024;
const validEd25519 = new Set<string>();

/** A prime-order Ed25519 point (libsodium's check), remembered once it passed. */
function validEd25519Point(ed25519: Buffer): boolean {
  const id = ed25519.toString('latin1');
  if (validEd25519.has(id)) return true;
  if (!sodium.crypto_core_ed25519_is_valid_point(ed25519)) return false;
  if (validEd25519.size >= VALID_ED25519_KEPT) validEd25519.delete(validEd25519.values().next().value!);
  validEd25519.add(id);
  return true;
}

/** Identity public key: type byte 0x01, X25519 (32 bytes), Ed25519 (32 bytes). */
export const PUBLIC_KEY_TYPE = 0x01;
export const PUBLIC_KEY_LENGTH = 65;

function badKey(message: string): MalformedRequestError {
  return new MalformedRequestError(message, 'INVALID_PUBLIC_KEY');
}

/**
 * Checks type and length, refuses all-zero halves, an Ed25519 half that is not
 * a valid prime-order point, and an X25519 half that is not canonical or of
 * small order (a shared secret with it would be all zeros).
 */
export function validatePublicKey(key: Uint8Array): Buffer {
  if (key.length !== PUBLIC_KEY_LENGTH) {
    throw badKey(`the public key must be ${PUBLIC_KEY_LENGTH} bytes (type 0x01, X25519, Ed25519), got ${key.length}`);
  }
  if (key[0] !== PUBLIC_KEY_TYPE)
    throw badKey(`unsupported public key type 0x${key[0]!.toString(16).padStart(2, '0')} (expected 0x01)`);
  const buf = Buffer.from(key);
  const x25519 = buf.subarray(1, 33);
  const ed25519 = buf.subarray(33, 65);
  if (x25519.every((b) => b === 0) || ed25519.every((b) => b === 0)) throw badKey('the public key is all zeros');
  if (!x25519Canonical(x25519)) throw badKey('the X25519 part of the public key is not canonically encoded');
  if (!validEd25519Point(ed25519)) throw badKey('the Ed25519 part of the public key is not a valid point');
  if (smallOrder(x25519)) throw badKey('the X25519 part of the public key is a small-order point');
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
  if (/[\u0000-\u0020\u007f]/.test(input))
    throw badEmail('the email address contains whitespace or control characters');
  if (/[^\u0021-\u007e]/.test(input))
    throw badEmail('the email address must be ASCII (write an international domain in its xn-- form)');
  if (input.startsWith('-')) throw badEmail('the email address must not start with "-"');
  const at = input.lastIndexOf('@');
  if (at <= 0 || input.indexOf('@') !== at) throw badEmail('the email address must have the form local@domain');
  const local = input.slice(0, at);
  const domain = input.slice(at + 1);
  if (local.length > 64) throw badEmail('the part before @ is longer than 64 characters');
  if (!localPart.test(local))
    throw badEmail('the part before @ may hold letters, digits and . _ % + = - (no leading, trailing or double dots)');
  const labels = domain.split('.');
  if (domain.length === 0 || labels.length < 2)
    throw badEmail('the domain must have at least two labels, like example.org');
  for (const l of labels) {
    if (!label.test(l))
      throw badEmail(
        'a domain label is empty, too long, or holds characters other than letters, digits and inner hyphens',
      );
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
