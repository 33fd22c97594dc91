/**
 * A TOTP seed from an export (an otpauth://totp/ URI or a bare base32
 * secret) in the form `stash set --totp` stores, so `stash otp` and `ls`
 * know it. A seed stash cannot read (Steam's steam://, an HOTP counter) is
 * kept as written, with a warning: losing it would be worse.
 */
import { formatTotp, parseTotp } from '../totp/otpauth.js';

export function totpValue(seed: string, title: string): { value: string; warning: string | null } {
  try {
    const params = parseTotp(seed);
    const value = formatTotp({ ...params, label: params.label || title });
    params.secret.fill(0);
    return { value, warning: null };
  } catch {
    // Not parseTotp's message: it may quote a character of the secret.
    return {
      value: seed,
      warning:
        'its TOTP seed is not an otpauth://totp/ URI or a base32 secret; it was kept as written, and stash otp cannot use it',
    };
  }
}
