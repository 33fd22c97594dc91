/**
 * The --clip options as the command table shows them (get, otp), kept apart
 * from the clipboard code so that the table (src/cli/command-table/entry.ts,
 * and `stash --help`) loads none of it.
 */
import type { OptionDef } from '../options.js';

/** Mirrors DEFAULT_CLIP_SECONDS of src/config/app-config.ts (checked by test/cli/clipboard.test.ts). */
export const HELP_CLIP_SECONDS = 45;

export const CLIP_OPTIONS = {
  clip: {
    type: 'boolean',
    short: 'c',
    help: `copy to the clipboard instead of printing; cleared after ${HELP_CLIP_SECONDS} s if it still holds the value (a later --clip replaces it)`,
  },
  'clip-seconds': {
    type: 'string',
    value: 'N',
    help: `with --clip: clear after N seconds (1-86400; else STASH_CLIP_SECONDS, cli.clip_seconds in the config file, ${HELP_CLIP_SECONDS})`,
  },
} as const satisfies Record<string, OptionDef>;
