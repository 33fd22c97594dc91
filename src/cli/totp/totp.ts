/**
 * RFC 6238 time-based one-time passwords over RFC 4226's HOTP: HMAC of the
 * 8-byte big-endian counter floor(time / period), dynamic truncation, then
 * the low `digits` decimal digits. node:crypto's HMAC, which has SHA-1
 * (libsodium does not).
 */
import { createHmac } from 'node:crypto';
import type { TotpParams } from './otpauth.js';

/** The code at `unixSeconds` (zero-padded to `digits`). */
export function totpAt(p: Pick<TotpParams, 'secret' | 'algorithm' | 'digits' | 'period'>, unixSeconds: number): string {
  const counter = Math.floor(unixSeconds / p.period);
  const msg = Buffer.alloc(8);
  msg.writeBigUInt64BE(BigInt(counter));
  const mac = createHmac(p.algorithm.toLowerCase(), p.secret).update(msg).digest();
  const offset = mac[mac.length - 1]! & 0x0f;
  const binary = ((mac[offset]! & 0x7f) << 24) | (mac[offset + 1]! << 16) | (mac[offset + 2]! << 8) | mac[offset + 3]!;
  mac.fill(0);
  return String(binary % 10 ** p.digits).padStart(p.digits, '0');
}

/** Seconds until the code shown at `unixSeconds` changes. */
export function secondsLeft(period: number, unixSeconds: number): number {
  return period - (Math.floor(unixSeconds) % period);
}
