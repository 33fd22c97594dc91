/**
 * Part of the command table (src/cli/registry.ts): the entry commands (set,
 * get, history, edit, run, import, ...) and the tools (doctor, completion).
 */
import { CLIP_OPTIONS } from '../clipboard/option-defs.js';
import { GENERATOR_OPTIONS } from '../generate/option-defs.js';
import type { Command } from '../command-types.js';
import { json, historyVersion, unlock } from './shared-options.js';

export const ENTRY_COMMANDS: Command[] = [
  {
    path: ['set'],
    args: '[CONTAINER] PATH',
    positionals: [1, 2],
    summary: 'store a value (from stdin when it is not a terminal, else a hidden prompt asked twice)',
    details:
      'One trailing newline of a value read from stdin is removed (so `echo token | stash set C N` stores "token"); --raw keeps ' +
      'every byte, for files such as PEM keys. At a terminal, an existing entry is replaced only after a yes (--force skips ' +
      'the question); a piped value replaces it without asking. A value is at most 64 KiB. NAME is a flat name like GITHUB_TOKEN ' +
      'or a path like web/github.com (segments of letters, digits, ".", "-", "_", "@"). An empty value (empty stdin, Enter at ' +
      'the prompt) is refused unless --allow-empty is given, so that a slip cannot overwrite a secret. ' +
      '--field NAME=VALUE sets a field of the entry (username, url, notes, totp, any lower-case name) and leaves its value as ' +
      'it is; the value is read only for an entry that does not exist yet. --field NAME (no "=") reads that field like a value, ' +
      'from stdin or a hidden prompt, for a field that is secret.',
    options: {
      ...unlock,
      'allow-empty': { type: 'boolean', help: 'store an empty value (refused otherwise)' },
      raw: { type: 'boolean', help: 'store the bytes of standard input exactly (no trailing newline removed)' },
      force: { type: 'boolean', help: 'replace an existing entry without asking (asked only at a terminal)' },
      generate: {
        type: 'boolean',
        help: 'store a new random value (see stash generate) instead of reading one; nothing is printed',
      },
      print: { type: 'boolean', help: 'with --generate: print the generated value once' },
      field: {
        type: 'string',
        value: 'NAME=VALUE',
        multiple: true,
        help: 'set a field of the entry, leaving its value (repeatable); NAME alone reads the field from stdin or a prompt',
      },
      totp: {
        type: 'string',
        value: 'URI|SECRET|-',
        help: 'store a TOTP seed: an otpauth://totp/ URI or a base32 secret (- reads it from stdin or the prompt); stash otp prints its codes',
      },
      ...GENERATOR_OPTIONS,
    },
    load: () => import('../commands/entry.js'),
  },
  {
    path: ['generate'],
    args: '',
    positionals: [0, 0],
    summary: 'print a random password (24 characters by default) or passphrase (--words N)',
    details:
      'Randomness from libsodium (randombytes_uniform: no modulo bias). The default set is A-Z a-z 0-9 and ' +
      '!#$%&()*+,-./:;<=>?@[]^_{|}~ (90 characters, about 6.5 bits each). Passphrases use the EFF long word list ' +
      '(7,776 words, about 12.9 bits each). Needs no vault. To store a new value directly: stash set C NAME --generate.',
    options: { ...GENERATOR_OPTIONS, json },
    load: () => import('../commands/generate.js'),
  },
  {
    path: ['get'],
    args: '[CONTAINER] PATH',
    positionals: [1, 2],
    summary: 'print a value (the only command that prints a secret), or copy it with --clip',
    details:
      'With --clip the value goes to the clipboard (wl-copy, xclip or xsel, pbcopy, PowerShell) instead of stdout, and a small ' +
      'helper clears it after the delay, or at once when the machine suspends, unless something else was copied meanwhile. ' +
      '--json prints {"container", "name", "value", "changedAt", "fields"} instead (a value that is not UTF-8 text is refused). ' +
      '--field NAME prints (or copies) one field of the entry instead of its value. ' +
      '--version N prints a previous value instead: 1 is the value before the current one (stash history lists them).',
    options: {
      ...unlock,
      ...CLIP_OPTIONS,
      json,
      version: historyVersion,
      field: {
        type: 'string',
        value: 'NAME',
        help: 'print one field of the entry (username, url, ...) instead of its value',
      },
    },
    load: () => import('../commands/entry.js'),
  },
  {
    path: ['history'],
    args: '[CONTAINER] PATH',
    positionals: [1, 2],
    summary: "list an entry's previous values: version, size and times, never a value",
    details:
      'Each write keeps the value it replaces (the last 10 per entry; vault.history_keep in the config file, 0 keeps none), ' +
      "inside the container's encrypted body: every member of a shared container sees it. Version 1 is the value before the current one. " +
      'stash get CONTAINER NAME --version N prints one; stash restore CONTAINER NAME --version N makes it current. ' +
      'An entry removed with rm keeps its history (rm --purge drops it). Each field has a history of its own: --field NAME lists it. ' +
      '--json prints {"container", "name", "current", "versions"} (and "field" with --field).',
    options: {
      ...unlock,
      json,
      field: { type: 'string', value: 'NAME', help: "list a field's previous values instead" },
    },
    load: () => import('../commands/history.js'),
  },
  {
    path: ['restore'],
    args: 'CONTAINER PATH --version N',
    positionals: [2, 2],
    summary: 'make a previous value of an entry current again (also brings back a removed entry)',
    details:
      'An ordinary write: the value it replaces becomes version 1, so a restore can be undone the same way. See stash history. ' +
      '--field NAME restores a previous value of that field (the entry must have a value).',
    options: {
      ...unlock,
      version: historyVersion,
      field: { type: 'string', value: 'NAME', help: 'restore a previous value of this field instead' },
    },
    load: () => import('../commands/history.js'),
  },
  {
    path: ['edit'],
    args: '[CONTAINER] PATH',
    positionals: [1, 2],
    summary: 'edit a value in $VISUAL or $EDITOR (a private file on tmpfs, removed afterwards)',
    details:
      'The value is written to a 0600 file in a new 0700 folder on a tmpfs (XDG_RUNTIME_DIR when it is one of yours, else ' +
      '/dev/shm), the editor runs on it, and the result is stored if it changed, byte for byte. The file (and whatever the ' +
      'editor left beside it) is overwritten and removed afterwards, also after Ctrl-C. Without a tmpfs the command refuses ' +
      'unless --insecure-tmp is given. The file is named by the last segment of PATH (github.com for web/github.com). ' +
      '--field NAME edits that field of the entry instead of its value.',
    options: {
      ...unlock,
      field: { type: 'string', value: 'NAME', help: 'edit this field of the entry instead of its value' },
      'insecure-tmp': {
        type: 'boolean',
        help: 'without a tmpfs (XDG_RUNTIME_DIR or /dev/shm): use the temporary folder, which may be on disk',
      },
    },
    load: () => import('../commands/edit.js'),
  },
  {
    path: ['read'],
    args: 'stash://CONTAINER/PATH[#FIELD]',
    positionals: [1, 1],
    summary: 'print one value by its secret reference (as get prints it)',
    details:
      'A reference is stash://CONTAINER/NAME; the same syntax works in stash run (environment values, dotenv files) and stash inject (templates).',
    options: unlock,
    load: () => import('../commands/read.js'),
  },
  {
    path: ['run'],
    args: '-- CMD [ARGS...]',
    positionals: [0, 0],
    passthrough: true,
    summary: 'run CMD with every environment value that is a stash:// reference replaced by its secret',
    details:
      'References come from this environment and the --env-file dotenv files (later sources win). Every container is opened once ' +
      '(one password prompt at most); an unknown reference is an error before CMD starts. --file NAME=REF writes the value to a ' +
      "0600 file on tmpfs (XDG_RUNTIME_DIR, else /dev/shm) and passes its path in NAME; the file is removed when CMD ends. --mask passes CMD's " +
      'output through stash and replaces every secret value (4 bytes or longer) with <concealed by stash>.',
    options: {
      ...unlock,
      'env-file': {
        type: 'string',
        value: 'FILE',
        multiple: true,
        help: 'read variables from a dotenv file (repeatable; later files win)',
      },
      'no-inherit': {
        type: 'boolean',
        help: 'start from an empty environment (PATH, HOME, USER, LOGNAME, LANG, TERM, TMPDIR and XDG_RUNTIME_DIR kept)',
      },
      file: {
        type: 'string',
        value: 'NAME=REF',
        multiple: true,
        help: 'write the secret REF to a private file and pass its path in NAME (repeatable)',
      },
      'insecure-tmp': {
        type: 'boolean',
        help: 'with --file and no tmpfs (XDG_RUNTIME_DIR or /dev/shm): use the temporary folder, which may be on disk',
      },
      mask: {
        type: 'boolean',
        help: 'conceal secret values in the output of CMD (its output then goes through a pipe, not the terminal)',
      },
    },
    load: () => import('../commands/run.js'),
  },
  {
    path: ['inject'],
    args: '',
    positionals: [0, 0],
    summary: 'fill a template: every {{ stash://CONTAINER/NAME }} replaced by its value',
    details:
      'The template comes from -i FILE or standard input; the result goes to standard output or -o FILE (written 0600, atomically; ' +
      'FILE must be a regular file or a new one, not a device, FIFO, socket, folder or symbolic link). ' +
      'Every reference is resolved first: a missing one is an error and nothing is written.',
    options: {
      ...unlock,
      in: {
        type: 'string',
        short: 'i',
        value: 'TEMPLATE',
        help: 'read the template from TEMPLATE (default: standard input)',
      },
      out: {
        type: 'string',
        short: 'o',
        value: 'FILE',
        help: 'write the result to FILE, mode 0600 (default: standard output)',
      },
    },
    load: () => import('../commands/inject.js'),
  },
  {
    path: ['otp'],
    args: '[CONTAINER] PATH',
    positionals: [1, 2],
    summary: 'print the current TOTP code of a seed stored with set --totp',
    details:
      'RFC 6238 with SHA1, SHA256 or SHA512, 6 to 8 digits, any period, as the otpauth URI says. A newline follows only on a terminal; ' +
      'a terminal is also told how long the code stays valid.',
    options: { ...unlock, json, ...CLIP_OPTIONS },
    load: () => import('../commands/otp.js'),
  },
  {
    path: ['ls'],
    args: '[CONTAINER] [FOLDER]',
    positionals: [0, 2],
    summary: "list a container's entries as a tree of paths: size, last change, field names (never a value)",
    details:
      'Entries are listed as a tree: a folder (web/) on a line of its own, the entries in it indented below; --flat lists full ' +
      'paths instead. FOLDER (web/ or web) lists only the entries under it (exit 66 when there are none). A FIELDS column names ' +
      'each entry\'s fields (never their values) once an entry has one. A change time is "-" (null in JSON) for an entry last ' +
      'written by a stash that did not record change times. --json prints [{"name" (the full path), "size", "changedAt", "totp", "fields"}].',
    options: { json, flat: { type: 'boolean', help: 'list full paths, one per line, instead of a tree' }, ...unlock },
    load: () => import('../commands/entries.js'),
  },
  {
    path: ['rm'],
    args: '[CONTAINER] PATH',
    positionals: [1, 2],
    summary: 'remove one entry (with its fields) or one field (--field) from a container',
    details:
      "An unknown PATH is an error (exit 66). The removed value joins the entry's history (stash history, stash restore); " +
      '--purge drops the entry and its whole history (and, with --purge, a PATH that only has a history). ' +
      '--field NAME removes only that field, and leaves the value and the other fields. ' +
      'The container keeps its key, so keys cached in the agent stay valid.',
    options: {
      ...unlock,
      field: { type: 'string', value: 'NAME', help: 'remove only this field of the entry' },
      purge: { type: 'boolean', help: 'drop the previous values too (the entry cannot be restored afterwards)' },
    },
    load: () => import('../commands/entries.js'),
  },
  {
    path: ['mv'],
    args: 'CONTAINER/PATH CONTAINER2/PATH2',
    positionals: [2, 3],
    summary: 'move an entry (with its fields) or a folder to another path or container',
    details:
      'The first / ends the container: work/web/github.com is the entry web/github.com of work. CONTAINER2/ keeps the path. ' +
      'A source ending in / is a folder: stash mv work/web/ work/sites/ moves every entry under web/ to sites/. ' +
      'A target ending in / that is not the container alone is a folder: an entry goes into it under its last segment. ' +
      'Within one container, stash mv CONTAINER FROM TO is the same (stash mv work web/ sites/). Within one container the move ' +
      'is one write and the history goes along. Across containers the target is written first and the source removed after. ' +
      'An existing target is refused (exit 73) unless --force.',
    options: { ...unlock, force: { type: 'boolean', short: 'f', help: 'replace an existing target entry' } },
    load: () => import('../commands/entry-move.js'),
  },
  {
    path: ['cp'],
    args: 'CONTAINER/PATH CONTAINER2/PATH2',
    positionals: [2, 3],
    summary: 'copy an entry (with its fields) or a folder to another path or container',
    details:
      'Paths and folders as for stash mv (stash cp work web/ backup/web/). The value is never printed; the history stays with ' +
      'the source. An existing target is refused (exit 73) unless --force.',
    options: { ...unlock, force: { type: 'boolean', short: 'f', help: 'replace an existing target entry' } },
    load: () => import('../commands/entry-move.js'),
  },
  {
    path: ['find'],
    args: 'PATTERN',
    positionals: [1, 1],
    summary: 'list CONTAINER/PATH of the entry paths that match, across every container (never values)',
    details:
      'PATTERN is a substring, or a glob (* ? [...]) that must match the whole path when it holds one of those characters (* also ' +
      'matches /: web/* finds web/github.com and web/old/site); case is ignored. Fields are not listed. ' +
      'Containers open in the agent are searched without a password; the others with the vault key, asked for once at most. ' +
      'Exit status 1 when nothing matched.',
    options: { json, ...unlock },
    load: () => import('../commands/find.js'),
  },
  {
    path: ['import'],
    args: 'FORMAT FILE --into CONTAINER',
    positionals: [2, 2],
    summary: 'import entries from dotenv, json, pass, bitwarden or 1password exports into a container, in one write',
    details:
      'FORMAT: dotenv (a .env file), json (a flat object of names to strings, as env --format json prints), pass (a password-store ' +
      'folder, each .gpg file decrypted with your gpg), bitwarden (its unencrypted JSON export), 1password (its CSV export). ' +
      'pass, bitwarden and 1password keep their structure: folders (or vaults) and item names become entry paths (web/github.com; ' +
      'a name that is not a valid segment is mapped: other characters become -), the password the value, and username, url, totp, ' +
      "notes and other fields (pass: 'key: value' lines, an otpauth line, the other lines) the entry's fields. --flat gives one flat " +
      'name per value instead (TITLE_USERNAME, TITLE_PASSWORD...), as dotenv and json always do (docs/cli.md). Every entry is written ' +
      'in one new version of the container, or nothing is. Entries that already exist are refused (exit 73) unless --overwrite or ' +
      '--skip-existing. Values are never printed; delete the plaintext export afterwards.',
    options: {
      into: { type: 'string', value: 'CONTAINER', help: 'the container to write to (required; it must exist)' },
      'dry-run': {
        type: 'boolean',
        help: 'list what would be written (paths, field names and sources, never values) and write nothing',
      },
      flat: { type: 'boolean', help: 'one flat env-shaped name per value (TITLE_PASSWORD, ...), no paths or fields' },
      overwrite: { type: 'boolean', help: 'replace entries that already exist' },
      'skip-existing': { type: 'boolean', help: 'keep entries that already exist and import the rest' },
      json,
      ...unlock,
    },
    load: () => import('../commands/import.js'),
  },
  {
    path: ['open'],
    args: 'CONTAINER',
    positionals: [1, 1],
    summary: 'unlock a container into the session agent (default 900 s)',
    details: '--ttl applies to every key this command caches (the vault key too when it had to be unlocked).',
    options: unlock,
    load: () => import('../commands/open.js'),
  },
  {
    path: ['env'],
    args: 'CONTAINER [CONTAINER...] -- CMD [ARGS...]',
    positionals: [1, 64],
    passthrough: true,
    commandOptional: true,
    summary: "run CMD with the containers' entries as environment variables (or print them with --format)",
    details:
      'Each entry becomes the variable named by its path: a path that is already a variable name (API_TOKEN) as it is, any other ' +
      'upper-cased with every character but letters, digits and _ turned into _ (web/github.com gives WEB_GITHUB_COM). Fields are ' +
      'not exported. Two paths of one container that give the same name are an error. Each container is opened once. A name held ' +
      'by two containers is an error unless --prefer names the one that wins. SIGINT, SIGTERM and SIGHUP are forwarded to CMD. The exit status is the exit status of CMD, or 128+N when signal N killed it. ' +
      '--format prints the entries instead of running a command (dotenv, json or shell), with a warning on a terminal.',
    options: {
      ...unlock,
      only: {
        type: 'string',
        value: 'PATH[,FOLDER/...]',
        help: 'only these entries: paths, and folders with a trailing / (web/)',
      },
      prefer: {
        type: 'string',
        value: 'CONTAINER',
        help: 'the container whose value wins when two hold the same name',
      },
      format: {
        type: 'string',
        value: 'FORMAT',
        help: 'print the entries as dotenv, json or shell (export) lines instead of running a command',
      },
    },
    load: () => import('../commands/env.js'),
  },
  {
    path: ['doctor'],
    args: '',
    positionals: [0, 0],
    summary: 'check the agent, its security, suspend protection, configuration and the vault',
    details: 'Exit status 0 only when no check failed. Starts the agent if it is not running.',
    options: { json },
    load: () => import('../commands/doctor.js'),
  },
  {
    path: ['completion'],
    args: 'SHELL',
    positionals: [1, 1],
    summary: 'print the completion script for bash, zsh or fish',
    details:
      'bash: add `source <(stash completion bash)` to ~/.bashrc. zsh: `stash completion zsh > "${fpath[1]}/_stash"` (or source it after compinit). ' +
      'fish: `stash completion fish > ~/.config/fish/completions/stash.fish`. Completes commands, options, container and contact names, and the ' +
      'entry paths of containers whose key the agent holds, a folder at a time (web/, then web/github.com); it never asks for a ' +
      'password and never starts the agent.',
    options: {},
    load: () => import('../commands/completion.js'),
  },
];
