/**
 * Character sets for `stash generate`: the documented default, and the
 * --charset SPEC syntax (literal characters and `a-z` style ranges of
 * printable ASCII). Pure: no randomness here.
 */
import { UsageError } from '../../errors.js';

const LOWER = 'abcdefghijklmnopqrstuvwxyz';
const UPPER = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ';
const DIGITS = '0123456789';
/**
 * Symbols that survive a shell, a .env file and a URL form without quoting
 * surprises: no space, quote, backslash or backtick.
 */
const SYMBOLS = '!#$%&()*+,-./:;<=>?@[]^_{|}~';

/** The default set: letters, digits and SYMBOLS (90 characters, about 6.49 bits each). */
export const DEFAULT_CHARSET = UPPER + LOWER + DIGITS + SYMBOLS;
/** --no-symbols: letters and digits (62 characters, about 5.95 bits each). */
export const ALNUM_CHARSET = UPPER + LOWER + DIGITS;

/**
 * The characters SPEC names, in code-point order without repeats. SPEC is
 * literal characters and ranges `x-y`; a `-` first or last is literal.
 * Only printable ASCII (no space) is allowed, so a password types the same
 * on every keyboard layout and needs no escaping in a terminal.
 */
export function parseCharset(spec: string): string {
  if (spec.length === 0) throw new UsageError('--charset must not be empty (example: --charset a-zA-Z0-9_-)');
  const chars = new Set<number>();
  const codes = [...spec].map((c) => c.codePointAt(0)!);
  for (let i = 0; i < codes.length; i++) {
    const c = codes[i]!;
    checkPrintable(c, spec);
    const isRange = codes[i + 1] === 0x2d && i + 2 < codes.length;
    if (!isRange) {
      chars.add(c);
      continue;
    }
    const end = codes[i + 2]!;
    checkPrintable(end, spec);
    if (end < c)
      throw new UsageError(
        `--charset: the range ${String.fromCodePoint(c)}-${String.fromCodePoint(end)} runs backwards`,
      );
    for (let x = c; x <= end; x++) chars.add(x);
    i += 2;
  }
  if (chars.size < 2) throw new UsageError(`--charset ${JSON.stringify(spec)} names fewer than 2 different characters`);
  return String.fromCharCode(...[...chars].sort((a, b) => a - b));
}

function checkPrintable(code: number, spec: string): void {
  if (code < 0x21 || code > 0x7e) {
    throw new UsageError(`--charset ${JSON.stringify(spec)}: only printable ASCII characters (no spaces) may be used`);
  }
}
