/** Options several commands of the table share (src/cli/command-table/). */
import { SHARED, type OptionDef } from '../options.js';

export const { json, passwordFile, passwordStdin, ttl, kdf, allowWeak } = SHARED;
export const historyVersion = {
  type: 'string',
  value: 'N',
  help: 'a previous value: 1 is the value before the current one, 2 the one before that (stash history lists them)',
} as const satisfies OptionDef;
export const unlock = { 'password-file': passwordFile, 'password-stdin': passwordStdin, ttl };
export const server = {
  type: 'string',
  value: 'URL',
  help: 'key server base URL (else STASH_KEY_SERVER_URL, else key_server_url in the config file)',
} as const satisfies OptionDef;
