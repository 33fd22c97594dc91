/**
 * Reading the vault password from the source password-source.ts chose: stdin,
 * a file, or a hidden prompt on the terminal. Every password is returned in
 * sodium secure memory; callers wipe() it.
 */
import { StashError, UsageError, errorMessage } from '../errors.js';
import { newPasswordProblem } from './password-strength.js';
import { constantTimeEqual, wipe } from '../vault/secure.js';
import { warn } from './output.js';
import type { PasswordSource } from './password-source.js';
import { haveTerminal, promptHidden } from './prompt.js';
import { readFdSecure, readFileSecure } from './secure-read.js';
import { isTerminal } from './terminal.js';

export { isExplicit, passwordSource, type PasswordSource } from './password-source.js';

/** Longest password accepted from any source. */
export const MAX_PASSWORD_BYTES = 4096;

/** Reads the password from stdin or the file; null when neither was given. */
export function readExplicitPassword(src: PasswordSource): Buffer | null {
  if (src.stdin) {
    if (isTerminal(0))
      throw new UsageError('--password-stdin: standard input is a terminal; leave the option out to be asked');
    return nonEmpty(
      readFdSecure(0, { maxBytes: MAX_PASSWORD_BYTES, what: 'the password on standard input', stripNewline: true }),
      'standard input',
    );
  }
  if (src.file !== null) {
    return nonEmpty(
      readFileSecure(src.file, {
        maxBytes: MAX_PASSWORD_BYTES,
        what: `password file (${src.fileFrom})`,
        stripNewline: true,
      }),
      src.file,
    );
  }
  return null;
}

function nonEmpty(pw: Buffer, where: string): Buffer {
  if (pw.length === 0) {
    wipe(pw);
    throw new StashError('INVALID_PASSWORD', `the password from ${where} is empty`);
  }
  return pw;
}

function noSource(): StashError {
  return new StashError(
    'NO_PASSWORD_SOURCE',
    'a password is needed but there is no terminal to ask on: use --password-file FILE, STASH_PASSWORD_FILE=FILE or --password-stdin',
  );
}

/** Asks for a password on the terminal; NO_PASSWORD_SOURCE without one. */
export async function promptPassword(question: string): Promise<Buffer> {
  if (!haveTerminal()) throw noSource();
  const pw = await promptHidden(question, MAX_PASSWORD_BYTES);
  return nonEmpty(pw, 'the prompt');
}

/**
 * Asks until the answer is not empty (three times at most): an Enter pressed
 * too early is a slip, not a reason to give up.
 */
async function promptNonEmpty(question: string): Promise<Buffer> {
  for (let attempt = 1; ; attempt++) {
    const pw = await promptHidden(question, MAX_PASSWORD_BYTES);
    if (pw.length > 0 || attempt >= 3) return nonEmpty(pw, 'the prompt');
    wipe(pw);
    process.stderr.write('The password cannot be empty; try again.\n');
  }
}

/**
 * A new password: from `file` when given (no confirmation), else from the
 * explicit source, else asked twice on the terminal (three tries to type the
 * same thing twice).
 */
export async function readNewPassword(
  src: PasswordSource,
  file: string | null,
  what = 'new vault password',
  allowWeak = false,
): Promise<Buffer> {
  // Checked as soon as the password is known, before the caller writes anything.
  const checked = (pw: Buffer): Buffer => {
    try {
      const warning = newPasswordProblem(pw, allowWeak);
      if (warning) warn(warning);
      return pw;
    } catch (err) {
      wipe(pw);
      throw err;
    }
  };
  if (file !== null) {
    return checked(
      nonEmpty(
        readFileSecure(file, { maxBytes: MAX_PASSWORD_BYTES, what: 'new password file', stripNewline: true }),
        file,
      ),
    );
  }
  const explicit = readExplicitPassword(src);
  if (explicit) return checked(explicit);
  if (!haveTerminal()) throw noSource();
  for (let attempt = 1; attempt <= 3; attempt++) {
    const first = await promptNonEmpty(`${capitalize(what)}: `);
    // Said before the repeat prompt, so a short password can still be changed.
    let warning: string | null;
    try {
      warning = newPasswordProblem(first, allowWeak);
    } catch (err) {
      wipe(first);
      if (attempt >= 3) throw err;
      process.stderr.write(`${errorMessage(err).replace(/\. Nothing was written$/, '')}; try again.\n`);
      continue;
    }
    if (warning) warn(warning);
    if (await repeatMatches(first, () => promptPassword(`Repeat the ${what}: `))) return first;
    if (attempt < 3) process.stderr.write('The two passwords differ; try again.\n');
  }
  throw new StashError('PASSWORD_MISMATCH', 'the two passwords differed three times; nothing was changed');
}

/**
 * Asks for the repeat of a secret typed blind and compares in constant time.
 * True keeps `first`; false (or an error, rethrown) has wiped it.
 */
export async function repeatMatches(first: Buffer, askRepeat: () => Promise<Buffer>): Promise<boolean> {
  let second: Buffer;
  try {
    second = await askRepeat();
  } catch (err) {
    wipe(first);
    throw err;
  }
  const same = constantTimeEqual(first, second);
  wipe(second);
  if (!same) wipe(first);
  return same;
}

function capitalize(s: string): string {
  return s.charAt(0).toUpperCase() + s.slice(1);
}
