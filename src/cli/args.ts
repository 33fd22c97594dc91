/**
 * Strict option parsing on top of node:util parseArgs: an unknown option or a
 * missing value becomes a UsageError that names it.
 */
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { UsageError } from '../errors.js';

export type OptionSpec = NonNullable<ParseArgsConfig['options']>;

export interface Parsed {
  values: Record<string, string | boolean | string[] | boolean[] | undefined>;
  positionals: string[];
}

/** Parses argv strictly; `usage` is appended to every error. */
export function parseOptions(argv: string[], options: OptionSpec, usage: string, allowPositionals = true): Parsed {
  try {
    const { values, positionals } = parseArgs({ args: argv, options, strict: true, allowPositionals });
    return { values: values as Parsed['values'], positionals };
  } catch (err) {
    const raw = err instanceof Error ? err.message.replace(/\. To specify a positional argument.*$/s, '') : String(err);
    // node:util capitalises its messages ("Unknown option"); every other stash error starts in lower case.
    const message = raw.charAt(0).toLowerCase() + raw.slice(1);
    throw new UsageError(`${message}\n${usage}`);
  }
}
