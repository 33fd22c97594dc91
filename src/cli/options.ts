/**
 * Option definitions shared by several commands, with the help text that
 * `--help` prints. One definition per option keeps the parser and the help in
 * step.
 */
import type { OptionSpec } from './args.js';

export interface OptionDef {
  type: 'string' | 'boolean';
  short?: string;
  /** Placeholder of the value in help, e.g. FILE. */
  value?: string;
  /** May be given several times; the command gets every value, in order. */
  multiple?: boolean;
  help: string;
}

export const SHARED = {
  json: { type: 'boolean', help: 'print JSON (for scripts)' },
  passwordFile: {
    type: 'string',
    value: 'FILE',
    help: 'read the vault password from FILE (its first line; also STASH_PASSWORD_FILE); not read, nor checked, while the agent holds the key',
  },
  passwordStdin: {
    type: 'boolean',
    help: 'read the vault password from standard input; not read, nor checked, while the agent holds the key',
  },
  ttl: {
    type: 'string',
    value: 'SECONDS',
    help: 'keep keys this command caches in the agent for SECONDS (default 900; sliding)',
  },
  kdf: {
    type: 'string',
    value: 'PRESET',
    help: 'Argon2id cost: moderate (default) or interactive',
  },
  allowWeak: {
    type: 'boolean',
    help: 'accept a new password shorter than 8 characters (also STASH_ALLOW_WEAK_PASSWORD=1; for tests and throwaway vaults)',
  },
} as const satisfies Record<string, OptionDef>;

/** The node:util parseArgs form of a command's options (help is always accepted). */
export function toParseSpec(options: Record<string, OptionDef>): OptionSpec {
  const spec: OptionSpec = { help: { type: 'boolean', short: 'h' } };
  for (const [name, o] of Object.entries(options)) {
    spec[name] = { type: o.type, ...(o.short ? { short: o.short } : {}), ...(o.multiple ? { multiple: true } : {}) };
  }
  return spec;
}
