/**
 * Which secret values can reach a command through its environment, or a
 * printed env file, byte for byte (`stash env`, `stash run`, `stash env
 * --format`).
 *
 * Node builds a child's environment from JS strings: a value is decoded from
 * UTF-8 to make the string and encoded again by spawn, so bytes that are not
 * UTF-8 (`\xff\xfe`) would reach the child as U+FFFD, a different secret that
 * nobody is told about. JSON text and a dotenv file are read back as UTF-8 the
 * same way. And a C environment ends a value at its first NUL byte (Node
 * refuses such a string; a shell drops the byte). So each value is checked
 * strictly before anything runs or is printed, and one that would change is
 * refused (65) by its name, never its bytes, with a way that keeps them:
 * `stash run --file` writes the value to a file exactly, `stash get` prints it.
 */
import { isUtf8 } from 'node:buffer';
import { StashError } from '../errors.js';

/** Why a value cannot be carried as text: a NUL byte, or bytes that are not UTF-8. */
export type Unfit = 'nul' | 'not-utf8';

/**
 * Why `value` cannot pass unchanged through UTF-8 text that holds no NUL byte
 * (an environment variable, a shell line), or null when it can. With
 * `nulAllowed` (JSON escapes a NUL, dotenv keeps it), only its UTF-8 counts.
 */
export function textUnfit(value: Buffer, nulAllowed = false): Unfit | null {
  if (!nulAllowed && value.includes(0)) return 'nul';
  return isUtf8(value) ? null : 'not-utf8';
}

/**
 * The refusal (65) of a value that `carrier` cannot hold exactly. `what`
 * names the value (`the value of BIN in work`), `after` says what was not
 * done and what to do instead. The message never holds the value.
 */
export function unfitError(reason: Unfit, what: string, carrier: string, after: string): StashError {
  return reason === 'nul'
    ? new StashError('VALUE_UNREPRESENTABLE', `${what} holds a NUL byte, which ${carrier} cannot carry; ${after}`)
    : new StashError(
        'NOT_UTF8',
        `${what} is not UTF-8 text, which ${carrier} cannot carry exactly (its bytes would change); ${after}`,
      );
}

/** `stash run --file NAME=stash://CONTAINER/ENTRY -- CMD`: the way to hand a command any bytes. */
export function fileAdvice(variable: string, ref: string): string {
  return `pass it as a file, which keeps every byte: stash run --file ${variable}=${ref} -- CMD`;
}
