/**
 * The generator's options as the command table shows them: kept apart from
 * the generator so that the table (src/cli/command-table/entry.ts, and
 * `stash --help`) loads no sodium.
 */
import type { OptionDef } from '../options.js';

/** Mirrors generator.ts's DEFAULT_LENGTH (checked by test/cli/generate.test.ts). */
const DEFAULT_LENGTH = 24;

export const GENERATOR_OPTIONS = {
  length: { type: 'string', value: 'N', help: `a password of N characters (default ${DEFAULT_LENGTH})` },
  words: {
    type: 'string',
    value: 'N',
    help: 'a passphrase of N words from the EFF long word list instead (6 or more recommended)',
  },
  charset: {
    type: 'string',
    value: 'SPEC',
    help: 'the characters to use: literal characters and ranges, e.g. a-zA-Z0-9_- (printable ASCII)',
  },
  'no-symbols': { type: 'boolean', help: 'letters and digits only' },
  separator: { type: 'string', value: 'S', help: 'between the words of a passphrase (default -)' },
} as const satisfies Record<string, OptionDef>;
