/**
 * The generator options shared by `stash generate` and `stash set --generate`,
 * checked before any password is asked: --length N, --words N, --charset SPEC,
 * --no-symbols, --separator S.
 */
import { UsageError } from '../../errors.js';
import type { Invocation } from '../command-types.js';
import { ALNUM_CHARSET, DEFAULT_CHARSET, parseCharset } from './charset.js';
import {
  DEFAULT_LENGTH,
  MAX_LENGTH,
  MAX_WORDS,
  entropyBits,
  generatePassphrase,
  generatePassword,
  wordList,
} from './generator.js';
import { GENERATOR_OPTIONS } from './option-defs.js';

export { GENERATOR_OPTIONS };

export interface Generator {
  /** A new value in secure memory (release with wipe()). */
  next(): Buffer;
  /** What it makes, for messages: "24 characters from 90 (155.7 bits)". */
  describe: string;
  bits: number;
}

function count(raw: unknown, flag: string, max: number): number | null {
  if (raw === undefined) return null;
  if (typeof raw !== 'string' || !/^[0-9]+$/.test(raw) || Number(raw) < 1 || Number(raw) > max) {
    throw new UsageError(`--${flag} must be a whole number from 1 to ${max}, got ${JSON.stringify(raw)}`);
  }
  return Number(raw);
}

/** The generator the options describe; a usage error for a contradictory or bad combination. */
export function generatorFrom(values: Invocation['values']): Generator {
  const words = count(values.words, 'words', MAX_WORDS);
  const length = count(values.length, 'length', MAX_LENGTH);
  const spec = values.charset;
  if (words !== null) {
    if (length !== null || spec !== undefined || values['no-symbols'] === true)
      throw new UsageError('--words makes a passphrase: it does not combine with --length, --charset or --no-symbols');
    const separator = typeof values.separator === 'string' ? values.separator : '-';
    if (!/^[\x20-\x7e]{0,8}$/.test(separator))
      throw new UsageError('--separator must be at most 8 printable ASCII characters');
    const bits = Math.floor(words * Math.log2(wordList().length) * 10) / 10;
    return {
      next: () => generatePassphrase(words, separator),
      bits,
      describe: `${words} words from ${wordList().length} (${bits} bits)`,
    };
  }
  if (values.separator !== undefined) throw new UsageError('--separator goes with --words');
  if (spec !== undefined && values['no-symbols'] === true)
    throw new UsageError('--charset and --no-symbols do not combine: leave the symbols out of SPEC');
  const charset =
    typeof spec === 'string' ? parseCharset(spec) : values['no-symbols'] === true ? ALNUM_CHARSET : DEFAULT_CHARSET;
  const n = length ?? DEFAULT_LENGTH;
  const bits = entropyBits(charset.length, n);
  return {
    next: () => generatePassword(charset, n),
    bits,
    describe: `${n} characters from ${charset.length} (${bits} bits)`,
  };
}

/** True when any generator option was given (set uses it to insist on --generate). */
export function anyGeneratorOption(values: Invocation['values']): boolean {
  return Object.keys(GENERATOR_OPTIONS).some((k) => values[k] !== undefined);
}
