/**
 * The rule for a new vault password, checked before anything is written: a
 * password shorter than MIN_PASSWORD_CHARS is refused (unless the user says
 * it is meant, with --allow-weak-password or STASH_ALLOW_WEAK_PASSWORD=1,
 * as test suites do), one shorter than GOOD_PASSWORD_CHARS is warned about
 * before the vault is created or re-wrapped. Length is the only measure: the
 * KDF makes each guess cost, and length is what a user can act on.
 */
import { StashError } from '../errors.js';

export const MIN_PASSWORD_CHARS = 8;
export const GOOD_PASSWORD_CHARS = 12;

/** Characters (Unicode code points) of UTF-8 bytes, counted without turning the secret into a string. */
export function passwordChars(pw: Buffer): number {
  let n = 0;
  for (let i = 0; i < pw.length; i++) if ((pw[i]! & 0xc0) !== 0x80) n++;
  return n;
}

/** True when weak passwords are allowed by flag or environment. */
export function weakAllowed(flag: unknown, env: NodeJS.ProcessEnv = process.env): boolean {
  return flag === true || env.STASH_ALLOW_WEAK_PASSWORD === '1';
}

/**
 * Checks a new password: throws WEAK_PASSWORD below the minimum (unless
 * allowed), returns a warning for a short one, else null.
 */
export function newPasswordProblem(pw: Buffer, allowWeak: boolean): string | null {
  const n = passwordChars(pw);
  if (n < MIN_PASSWORD_CHARS && !allowWeak) {
    throw new StashError(
      'WEAK_PASSWORD',
      `the new password has ${n} character${n === 1 ? '' : 's'}; at least ${MIN_PASSWORD_CHARS} are needed (a passphrase of several words is best). Nothing was written`,
    );
  }
  if (n < GOOD_PASSWORD_CHARS)
    return `this password has only ${n} characters; ${GOOD_PASSWORD_CHARS} or more (a passphrase of several words) is much harder to guess`;
  return null;
}
