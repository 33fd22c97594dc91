/**
 * TOTP seeds as stash stores them: an `otpauth://totp/...` URI (Google
 * Authenticator's key URI format, the one QR codes and password-manager
 * exports carry), normalised so that every stored seed has the same form and
 * `ls` can mark it. A bare base32 secret becomes a URI with the defaults
 * (SHA1, 6 digits, 30 s). Pure: bytes in, bytes out; no clock.
 */
import { StashError } from '../../errors.js';

export type TotpAlgorithm = 'SHA1' | 'SHA256' | 'SHA512';

export interface TotpParams {
  /** The shared secret (decoded base32). */
  secret: Buffer;
  algorithm: TotpAlgorithm;
  digits: number;
  period: number;
  label: string;
  issuer: string | null;
}

export const TOTP_PREFIX = 'otpauth://totp/';

function bad(message: string): StashError {
  return new StashError('INVALID_TOTP', message);
}

/** RFC 4648 base32, case-insensitive; spaces, dashes and `=` padding are ignored. */
export function decodeBase32(text: string): Buffer {
  const clean = text.replace(/[\s=-]/g, '').toUpperCase();
  if (clean.length === 0) throw bad('the TOTP secret is empty');
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';
  const out = Buffer.alloc(Math.floor((clean.length * 5) / 8));
  let bits = 0;
  let acc = 0;
  let at = 0;
  for (const c of clean) {
    const v = alphabet.indexOf(c);
    if (v < 0)
      throw bad(`the TOTP secret is not base32: it holds ${JSON.stringify(c)} (letters A-Z and digits 2-7 only)`);
    acc = (acc << 5) | v;
    bits += 5;
    if (bits >= 8) {
      out[at++] = (acc >>> (bits - 8)) & 0xff;
      bits -= 8;
    }
  }
  return out;
}

function encodeBase32(bytes: Buffer): string {
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';
  let out = '';
  let bits = 0;
  let acc = 0;
  for (const b of bytes) {
    acc = (acc << 8) | b;
    bits += 8;
    while (bits >= 5) {
      out += alphabet[(acc >>> (bits - 5)) & 31];
      bits -= 5;
    }
  }
  if (bits > 0) out += alphabet[(acc << (5 - bits)) & 31];
  return out;
}

/** Parses a stored or given seed: an otpauth://totp URI or a bare base32 secret. */
export function parseTotp(text: string): TotpParams {
  const trimmed = text.trim();
  if (!/^otpauth:/i.test(trimmed)) {
    return {
      secret: checkedSecret(decodeBase32(trimmed)),
      algorithm: 'SHA1',
      digits: 6,
      period: 30,
      label: '',
      issuer: null,
    };
  }
  let url: URL;
  try {
    url = new URL(trimmed);
  } catch {
    throw bad('the otpauth URI cannot be parsed');
  }
  if (url.host.toLowerCase() !== 'totp')
    throw bad(`only otpauth://totp/ URIs are supported (got otpauth://${url.host}/: HOTP counters are not)`);
  const q = url.searchParams;
  const secret = q.get('secret');
  if (secret === null) throw bad('the otpauth URI has no secret= parameter');
  const algorithm = (q.get('algorithm') ?? 'SHA1').toUpperCase();
  if (algorithm !== 'SHA1' && algorithm !== 'SHA256' && algorithm !== 'SHA512')
    throw bad(`algorithm must be SHA1, SHA256 or SHA512, got ${JSON.stringify(algorithm)}`);
  const digits = whole(q.get('digits') ?? '6', 'digits', 6, 8);
  const period = whole(q.get('period') ?? '30', 'period', 1, 86400);
  const label = decodeURIComponent(url.pathname.replace(/^\//, ''));
  return { secret: checkedSecret(decodeBase32(secret)), algorithm, digits, period, label, issuer: q.get('issuer') };
}

function whole(raw: string, what: string, min: number, max: number): number {
  if (!/^[0-9]+$/.test(raw) || Number(raw) < min || Number(raw) > max)
    throw bad(`${what} must be a whole number from ${min} to ${max}, got ${JSON.stringify(raw)}`);
  return Number(raw);
}

/** RFC 4226 asks for at least 128 bits; 80 (what many sites hand out) is accepted, less is a typo. */
function checkedSecret(secret: Buffer): Buffer {
  if (secret.length < 10)
    throw bad(`the TOTP secret is ${secret.length} bytes; at least 10 (16 base32 characters) are expected`);
  return secret;
}

/** The stored form: one normalised URI (the secret re-encoded, every parameter spelt out). */
export function formatTotp(p: TotpParams): string {
  const params = new URLSearchParams({
    secret: encodeBase32(p.secret),
    algorithm: p.algorithm,
    digits: String(p.digits),
    period: String(p.period),
  });
  if (p.issuer) params.set('issuer', p.issuer);
  return `${TOTP_PREFIX}${encodeURIComponent(p.label)}?${params.toString()}`;
}

/** True when a stored value is a TOTP seed (what `ls` marks). */
export function isTotpValue(value: Uint8Array): boolean {
  return (
    value.length >= TOTP_PREFIX.length &&
    Buffer.from(value.buffer, value.byteOffset, TOTP_PREFIX.length).toString('latin1') === TOTP_PREFIX
  );
}
