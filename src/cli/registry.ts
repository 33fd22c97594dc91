/**
 * The command table: words, usage, options (with their help text) and a lazy
 * `load()`. main.ts parses options strictly from this table before a command's
 * module is imported, so `stash <anything> --help` and usage errors load
 * neither sodium, Koa, the keyring nor the native addon.
 */
import { SHARED, type OptionDef } from './options.js';
import { distance, nearest } from './suggest.js';
import { GENERATOR_OPTIONS } from './generate/option-defs.js';
import { CLIP_OPTIONS } from './clipboard/option-defs.js';

export type { OptionDef } from './options.js';

export interface Invocation {
  command: Command;
  /** Option values; an option with `multiple` gives a string[]. */
  values: Record<string, string | boolean | string[] | undefined>;
  positionals: string[];
  /** Words after `--` (only for commands with `passthrough`). */
  rest: string[];
}

export interface CommandModule {
  run(inv: Invocation): Promise<number>;
}

export interface Command {
  /** Words that select the command, e.g. ['vault', 'sessions', 'lock']. */
  path: string[];
  /** Arguments shown in the usage line. */
  args: string;
  /** Fewest and most positional arguments. */
  positionals: [number, number];
  summary: string;
  /** Extra help paragraphs, shown by --help. */
  details?: string;
  options: Record<string, OptionDef>;
  /** Takes `-- CMD ARGS...` after its own arguments. */
  passthrough?: boolean;
  /** With passthrough: the command may be left out (the command checks when it is needed). */
  commandOptional?: boolean;
  load(): Promise<CommandModule>;
}

const { json, passwordFile, passwordStdin, ttl, kdf, allowWeak } = SHARED;
const historyVersion = {
  type: 'string',
  value: 'N',
  help: 'a previous value: 1 is the value before the current one, 2 the one before that (stash history lists them)',
} as const satisfies OptionDef;
const unlock = { 'password-file': passwordFile, 'password-stdin': passwordStdin, ttl };
const server = {
  type: 'string',
  value: 'URL',
  help: 'key server base URL (else STASH_KEY_SERVER_URL, else key_server_url in the config file)',
} as const satisfies OptionDef;

export const commands: Command[] = [
  {
    path: ['vault', 'init'],
    args: '',
    positionals: [0, 0],
    summary: 'create a new vault (asks for a new password twice) and unlock it for this session',
    details:
      'The vault folder is STASH_VAULT_DIR, else the platform data folder (Linux: $XDG_DATA_HOME/stash or ~/.local/share/stash). ' +
      'The new vault key is cached in the session agent, as the first command of a session would do.',
    options: {
      'password-file': passwordFile,
      'password-stdin': passwordStdin,
      kdf,
      ttl,
      'allow-weak-password': allowWeak,
      'recovery-key': {
        type: 'boolean',
        help: 'make a recovery key and show it once, to write down (default: none; init says how to make one later)',
      },
      'no-recovery-key': { type: 'boolean', help: 'make no recovery key (the default, said explicitly)' },
      json,
    },
    load: () => import('./commands/vault-init.js'),
  },
  {
    path: ['vault', 'recover'],
    args: '',
    positionals: [0, 0],
    summary: 'set a new password with the recovery key (when the password is forgotten)',
    details:
      'The recovery key comes from --recovery-key-file FILE, else standard input when it is not a terminal, else a hidden prompt; ' +
      'the new password from --password-file, STASH_PASSWORD_FILE or --password-stdin, else it is asked twice. The recovery key keeps working.',
    options: {
      'password-file': {
        type: 'string',
        value: 'FILE',
        help: 'read the NEW password from FILE (first line; also STASH_PASSWORD_FILE)',
      },
      'password-stdin': { type: 'boolean', help: 'read the NEW password from standard input' },
      'recovery-key-file': { type: 'string', value: 'FILE', help: 'read the recovery key from FILE' },
      'allow-weak-password': allowWeak,
    },
    load: () => import('./commands/vault-recovery.js'),
  },
  {
    path: ['vault', 'recovery-key', 'status'],
    args: '',
    positionals: [0, 0],
    summary: 'whether the vault has a recovery key, and since when',
    options: { json },
    load: () => import('./commands/vault-recovery.js'),
  },
  {
    path: ['vault', 'recovery-key', 'create'],
    args: '',
    positionals: [0, 0],
    summary: 'make a (new) recovery key and show it once; asks for the password; an older one stops working',
    options: { 'password-file': passwordFile, 'password-stdin': passwordStdin, json },
    load: () => import('./commands/vault-recovery.js'),
  },
  {
    path: ['vault', 'recovery-key', 'remove'],
    args: '',
    positionals: [0, 0],
    summary: 'remove the recovery key (asks for the password)',
    options: { 'password-file': passwordFile, 'password-stdin': passwordStdin },
    load: () => import('./commands/vault-recovery.js'),
  },
  {
    path: ['vault', 'passwd'],
    args: '',
    positionals: [0, 0],
    summary: 'change the vault password (re-wraps the vault key; nothing else is rewritten)',
    details:
      'Asks for the current password, then the new one twice. Scripts give the current password with --password-file/--password-stdin/STASH_PASSWORD_FILE and the new one with --new-password-file.',
    options: {
      'password-file': passwordFile,
      'password-stdin': passwordStdin,
      'new-password-file': { type: 'string', value: 'FILE', help: 'read the new password from FILE (first line)' },
      kdf,
      'allow-weak-password': allowWeak,
    },
    load: () => import('./commands/vault-passwd.js'),
  },
  {
    path: ['vault', 'backup'],
    args: 'FILE',
    positionals: [1, 1],
    summary: 'write the whole vault to one file, still encrypted (restoring it needs the password)',
    details:
      "Holds vault.json, the identity, the contacts, every container, the shared containers' records and the contents of their " +
      'linked files, with a MAC keyed by the vault key. Needs the vault key (agent or password). FILE is written 0600; an existing ' +
      'FILE is replaced only with --force.',
    options: { ...unlock, force: { type: 'boolean', help: 'replace an existing FILE' } },
    load: () => import('./commands/vault-backup.js'),
  },
  {
    path: ['vault', 'restore'],
    args: 'FILE',
    positionals: [1, 1],
    summary: 'restore a vault backup (asks for the password it was made with)',
    details:
      "Restores into the vault folder, or --into DIR. Everything is checked before it takes the folder's place: the password, " +
      "the backup's MAC, every container opening. An existing vault is replaced only with --force, and is then moved aside to " +
      'DIR.before-restore-TIME, not deleted. Linked shared files are written back where they were when nothing is there.',
    options: {
      'password-file': passwordFile,
      'password-stdin': passwordStdin,
      into: { type: 'string', value: 'DIR', help: 'restore into DIR instead of the vault folder' },
      force: { type: 'boolean', help: 'replace an existing vault (it is moved aside)' },
    },
    load: () => import('./commands/vault-backup.js'),
  },
  {
    path: ['vault', 'identity', 'show'],
    args: '',
    positionals: [0, 0],
    summary: 'show your public keys and fingerprint (to read over the phone)',
    options: { json },
    load: () => import('./commands/vault-identity.js'),
  },
  {
    path: ['vault', 'identity', 'publish'],
    args: '--email ADDR',
    positionals: [0, 0],
    summary: 'publish your public key on a key server; prints a share code for the other person',
    details:
      'The server mails a verification link to ADDR; the share can be received once the link is confirmed, ' +
      'until it expires (15 minutes by default). Give the share code to the other person, and read them your ' +
      'fingerprint (stash vault identity show) over another channel. Needs the vault key: the published keys are ' +
      'checked against the encrypted identity first.',
    options: {
      email: { type: 'string', value: 'ADDR', help: 'your email address (required; the server verifies it)' },
      server,
      json,
      ...unlock,
    },
    load: () => import('./commands/vault-publish.js'),
  },
  {
    path: ['vault', 'identity', 'unpublish'],
    args: 'CODE | --all',
    positionals: [0, 1],
    summary: 'delete a key you published from the key server before it expires',
    details:
      'The request is signed with your identity key, so only the publisher can unpublish a share; every server of ' +
      'the cluster stops handing it out. --all unpublishes every share this vault published and has not seen expire ' +
      '(recorded in published.json in the vault folder; shares published from another copy of the vault are not). ' +
      "Needs the vault key. The owner of the address can delete too, without the vault: the server's /manage page mails a link.",
    options: {
      all: { type: 'boolean', help: 'every unexpired share this vault published' },
      server,
      json,
      ...unlock,
    },
    load: () => import('./commands/vault-unpublish.js'),
  },
  {
    path: ['vault', 'identity', 'rotate'],
    args: '',
    positionals: [0, 0],
    summary: 'replace your identity keys; your contacts take the new key from a statement the old key signs',
    details:
      'Asks for the password (a cached key is not enough) and, at a terminal, for a yes. Shared containers you own are ' +
      're-sealed to the new keys with a new content key; for containers you are a member of, it lists the owners who must ' +
      'accept your statement (stash vault contact accept-rotation FILE) before you can open them again. The old secret keys ' +
      'leave the vault once every owned container is re-sealed; if one cannot be (a linked file that is missing), they are ' +
      'kept and running rotate again finishes the job (exit 1 until then). Send the statement (stash vault identity ' +
      'statement --out FILE) to each contact.',
    options: {
      yes: { type: 'boolean', help: 'do not ask for confirmation (needed off a terminal)' },
      json,
      'password-file': passwordFile,
      'password-stdin': passwordStdin,
    },
    load: () => import('./commands/vault-rotate.js'),
  },
  {
    path: ['vault', 'identity', 'statement'],
    args: '',
    positionals: [0, 0],
    summary: 'print (or write with --out) the statement of your last identity rotation, for your contacts',
    details:
      'One line of text, signed by the old and the new key; it holds nothing secret. A contact who checked your old ' +
      'fingerprint takes it with stash vault contact accept-rotation FILE. Unlocks the vault (the agent or the password) to ' +
      'check that the statement hands over to your current key; a statement that does not is refused (exit 65). ' +
      'An existing FILE is not replaced.',
    options: {
      out: {
        type: 'string',
        value: 'FILE',
        help: 'write the statement to FILE (a new file) instead of standard output',
      },
      json,
      ...unlock,
    },
    load: () => import('./commands/vault-rotate.js'),
  },
  {
    path: ['vault', 'contact', 'accept-rotation'],
    args: 'FILE',
    positionals: [1, 1],
    summary: "take a contact's new key from their rotation statement (no fingerprint check: their old key signed it)",
    details:
      'FILE is the statement from stash vault identity statement (- reads standard input). Accepted only when it is ' +
      "signed by a contact's current key, which you checked by fingerprint (else exit 66: receive the new key with a " +
      'fingerprint check). A second, different statement from a key that already rotated is refused (exit 65): that key ' +
      "is in someone else's hands. Shared containers the contact owns are trusted under the new key; those you own are " +
      're-sealed to it.',
    options: { json, ...unlock },
    load: () => import('./commands/vault-accept-rotation.js'),
  },
  {
    path: ['vault', 'contact', 'receive'],
    args: 'CODE',
    positionals: [1, 1],
    summary: 'fetch a published key by its share code and add it as a contact once its fingerprint matches',
    details:
      'The fingerprint must come from the publisher by another channel (phone, in person). It is asked on the ' +
      'terminal, or given with --fingerprint (case, spaces and hyphens do not matter). A mismatch adds nothing (exit 65). ' +
      "The servers tried follow the key server's topology: the code's primary, then its failovers.",
    options: {
      fingerprint: { type: 'string', value: 'FP', help: "the publisher's fingerprint, received out of band" },
      name: { type: 'string', value: 'NAME', help: 'name of the new contact (default: the verified email address)' },
      server,
      json,
      ...unlock,
    },
    load: () => import('./commands/vault-receive.js'),
  },
  {
    path: ['vault', 'contact', 'list'],
    args: '',
    positionals: [0, 0],
    summary: 'list your contacts',
    options: { json, ...unlock },
    load: () => import('./commands/vault-contact.js'),
  },
  {
    path: ['vault', 'contact', 'show'],
    args: 'NAME',
    positionals: [1, 1],
    summary: 'show one contact and its fingerprint',
    options: { json, ...unlock },
    load: () => import('./commands/vault-contact.js'),
  },
  {
    path: ['vault', 'contact', 'remove'],
    args: 'NAME',
    positionals: [1, 1],
    summary: 'remove a contact',
    options: unlock,
    load: () => import('./commands/vault-contact.js'),
  },
  {
    path: ['vault', 'sessions'],
    args: '',
    positionals: [0, 0],
    summary: 'list the unlocked containers (name, path, expires in)',
    options: { json },
    load: () => import('./commands/sessions.js'),
  },
  {
    path: ['vault', 'sessions', 'lock'],
    args: 'CONTAINER',
    positionals: [1, 1],
    summary: "forget one container's key and the cached vault key that could open it again (by name or path)",
    options: {},
    load: () => import('./commands/sessions.js'),
  },
  {
    path: ['vault', 'sessions', 'lock-all'],
    args: '',
    positionals: [0, 0],
    summary: 'forget every cached key, the vault key included',
    options: {},
    load: () => import('./commands/sessions.js'),
  },
  {
    path: ['vault', 'sessions', 'stop'],
    args: '',
    positionals: [0, 0],
    summary: 'stop the session agent (its keys are wiped)',
    options: {},
    load: () => import('./commands/sessions.js'),
  },
  {
    path: ['vault', 'sessions', 'auto-unlock', 'status'],
    args: '',
    positionals: [0, 0],
    summary: 'whether the vault password is kept in the OS keyring',
    options: { json },
    load: () => import('./commands/auto-unlock.js'),
  },
  {
    path: ['vault', 'sessions', 'auto-unlock', 'enable'],
    args: '',
    positionals: [0, 0],
    summary: 'store the vault password in the OS keyring and use it instead of asking',
    options: { 'password-file': passwordFile, 'password-stdin': passwordStdin },
    load: () => import('./commands/auto-unlock.js'),
  },
  {
    path: ['vault', 'sessions', 'auto-unlock', 'disable'],
    args: '',
    positionals: [0, 0],
    summary: 'stop using the stored password (it stays in the keyring; see forget)',
    options: {},
    load: () => import('./commands/auto-unlock.js'),
  },
  {
    path: ['vault', 'sessions', 'auto-unlock', 'forget'],
    args: '',
    positionals: [0, 0],
    summary: 'delete the stored password from the keyring and disable auto-unlock',
    options: {},
    load: () => import('./commands/auto-unlock.js'),
  },
  {
    path: ['container', 'create'],
    args: 'NAME',
    positionals: [1, 1],
    summary: 'create an empty container',
    options: unlock,
    load: () => import('./commands/container.js'),
  },
  {
    path: ['container', 'list'],
    args: '',
    positionals: [0, 0],
    summary: 'list the containers (no password needed)',
    options: { json },
    load: () => import('./commands/container.js'),
  },
  {
    path: ['container', 'rm'],
    args: 'NAME',
    positionals: [1, 1],
    summary: 'delete a container and all its entries',
    details:
      'Asks to confirm on a terminal; elsewhere --force is required. A linked shared container is only unlinked: its file is kept.',
    options: { force: { type: 'boolean', short: 'f', help: 'do not ask for confirmation' } },
    load: () => import('./commands/container.js'),
  },
  {
    path: ['container', 'rename'],
    args: 'OLD NEW',
    positionals: [2, 2],
    summary: 'rename a container (a shared one only in this vault: its file, id and members stay)',
    details:
      'A private container is rewritten under the new name with the same id and content key (needs the vault key; cached keys stay valid). ' +
      'A shared container keeps its file (a linked one is not touched), id and members; only the name this vault knows it by changes, and no password is needed.',
    options: unlock,
    load: () => import('./commands/container-rename.js'),
  },
  {
    path: ['container', 'share'],
    args: 'NAME CONTACT [CONTACT...]',
    positionals: [2, 64],
    summary: 'share a container with contacts (each opens it with their own key and password)',
    details:
      'CONTACT is a name from `stash vault contact list` (keys checked by fingerprint). The first share turns a private ' +
      'container into a shared one (file format 2) that you own; only the owner changes its members. Give the file to ' +
      'the others with `stash container export NAME FILE`, or keep it in a shared folder or git repository (`stash container link`).',
    options: unlock,
    load: () => import('./commands/container-share.js'),
  },
  {
    path: ['container', 'unshare'],
    args: 'NAME CONTACT [CONTACT...]',
    positionals: [2, 64],
    summary: 'remove members and rotate the content key (they keep what they already read)',
    details:
      'A new content key is made, the entries re-encrypted and the key sealed to every remaining member, so a removed ' +
      'member cannot read later versions. They keep whatever they already read, and their old copies of the file still ' +
      "open: change those secrets if that matters. CONTACT is a contact name or a member's fingerprint.",
    options: unlock,
    load: () => import('./commands/container-share.js'),
  },
  {
    path: ['container', 'exposure'],
    args: 'NAME',
    positionals: [1, 1],
    summary: 'for each former member: the entries they could read that nobody has changed since (names, never values)',
    details:
      'Former members are those this vault removed with unshare. An entry stays on the list until it is changed with set after the removal ' +
      "(change times are the writers' clocks).",
    options: {
      ...unlock,
      member: { type: 'string', value: 'NAME|FINGERPRINT', help: 'only this former member' },
      json,
    },
    load: () => import('./commands/container-exposure.js'),
  },
  {
    path: ['container', 'members'],
    args: 'NAME',
    positionals: [1, 1],
    summary: 'owner, members with names and fingerprints, who wrote the current version and when',
    details: 'Names come from your contacts, so the vault key is needed.',
    options: { json, ...unlock },
    load: () => import('./commands/container-share.js'),
  },
  {
    path: ['container', 'accept'],
    args: 'NAME',
    positionals: [1, 1],
    summary: 'accept a shared container file that was refused as older or diverged, as it is now',
    details:
      'For after a rollback (83) or divergence (84) refusal that you have looked into: every other check still runs, ' +
      'then the file becomes the version this vault remembers. Changes that only the refused-over version had are given up. ' +
      'An older recipient list than the one this vault saw is never taken (83): it would let members removed since read what is written next.',
    options: unlock,
    load: () => import('./commands/container-share.js'),
  },
  {
    path: ['container', 'merge'],
    args: 'NAME FILE',
    positionals: [2, 2],
    summary: 'merge another version of a shared container (after concurrent edits) into a new version',
    details:
      'For after a divergence refusal (84), e.g. a git conflict: FILE is the other version (git show :3:NAME.stash > FILE). ' +
      'The new version holds the entries of both and is accepted by every member. An entry both versions changed is refused ' +
      "unless --prefer says which side wins (the losing value goes into that entry's history); an entry deleted on one side and kept on the other is kept. " +
      'The histories of both versions are united, newest first, up to vault.history_keep per entry.',
    options: {
      prefer: {
        type: 'string',
        value: 'SIDE',
        help: "which value wins an entry both versions changed: 'container' (NAME's file) or 'file' (FILE)",
      },
      ...unlock,
    },
    load: () => import('./commands/container-transfer.js'),
  },
  {
    path: ['container', 'export'],
    args: 'NAME FILE',
    positionals: [2, 2],
    summary: 'write a shared container to FILE (a copy to hand on, or an update of an older copy)',
    details:
      'An existing FILE must hold an older version of the same container; a newer or diverged one is refused. No password is needed.',
    options: {},
    load: () => import('./commands/container-transfer.js'),
  },
  {
    path: ['container', 'import'],
    args: 'FILE',
    positionals: [1, 1],
    summary: 'copy a shared container file into the vault (or update the copy)',
    details:
      'You must be one of its recipients, and its owner you or one of your contacts. NAME defaults to the file name without .stash.',
    options: { name: { type: 'string', value: 'NAME', help: 'the container name in this vault' }, ...unlock },
    load: () => import('./commands/container-transfer.js'),
  },
  {
    path: ['container', 'link'],
    args: 'PATH',
    positionals: [1, 1],
    summary: 'use a shared container file where it is (a git repository, a shared folder)',
    details:
      "get, set and env then read and write PATH directly, so `git pull` brings the team's changes. Concurrent edits are " +
      'detected and refused, never silently lost. If the vault holds a copy of the same container under NAME, the link replaces it.',
    options: {
      name: {
        type: 'string',
        value: 'NAME',
        help: 'the container name in this vault (default: the file name without .stash)',
      },
      ...unlock,
    },
    load: () => import('./commands/container-transfer.js'),
  },
  {
    path: ['set'],
    args: 'CONTAINER NAME',
    positionals: [2, 2],
    summary: 'store a value (from stdin when it is not a terminal, else a hidden prompt asked twice)',
    details:
      'One trailing newline of a value read from stdin is removed (so `echo token | stash set C N` stores "token"); --raw keeps ' +
      'every byte, for files such as PEM keys. At a terminal, an existing entry is replaced only after a yes (--force skips ' +
      'the question); a piped value replaces it without asking. A value is at most 64 KiB. NAME is like an environment ' +
      'variable name. An empty value (empty stdin, Enter at the prompt) is refused unless --allow-empty is given, so that ' +
      'a slip cannot overwrite a secret.',
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
      totp: {
        type: 'string',
        value: 'URI|SECRET|-',
        help: 'store a TOTP seed: an otpauth://totp/ URI or a base32 secret (- reads it from stdin or the prompt); stash otp prints its codes',
      },
      ...GENERATOR_OPTIONS,
    },
    load: () => import('./commands/entry.js'),
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
    load: () => import('./commands/generate.js'),
  },
  {
    path: ['get'],
    args: 'CONTAINER NAME',
    positionals: [2, 2],
    summary: 'print a value (the only command that prints a secret), or copy it with --clip',
    details:
      'With --clip the value goes to the clipboard (wl-copy, xclip or xsel, pbcopy, PowerShell) instead of stdout, and a small ' +
      'helper clears it after the delay, or at once when the machine suspends, unless something else was copied meanwhile. ' +
      '--json prints {"container", "name", "value", "changedAt"} instead (a value that is not UTF-8 text is refused). ' +
      '--version N prints a previous value instead: 1 is the value before the current one (stash history lists them).',
    options: { ...unlock, ...CLIP_OPTIONS, json, version: historyVersion },
    load: () => import('./commands/entry.js'),
  },
  {
    path: ['history'],
    args: 'CONTAINER NAME',
    positionals: [2, 2],
    summary: "list an entry's previous values: version, size and times, never a value",
    details:
      'Each write keeps the value it replaces (the last 10 per entry; vault.history_keep in the config file, 0 keeps none), ' +
      "inside the container's encrypted body: every member of a shared container sees it. Version 1 is the value before the current one. " +
      'stash get CONTAINER NAME --version N prints one; stash restore CONTAINER NAME --version N makes it current. ' +
      'An entry removed with rm keeps its history (rm --purge drops it). --json prints {"container", "name", "current", "versions"}.',
    options: { ...unlock, json },
    load: () => import('./commands/history.js'),
  },
  {
    path: ['restore'],
    args: 'CONTAINER NAME --version N',
    positionals: [2, 2],
    summary: 'make a previous value of an entry current again (also brings back a removed entry)',
    details:
      'An ordinary write: the value it replaces becomes version 1, so a restore can be undone the same way. See stash history.',
    options: { ...unlock, version: historyVersion },
    load: () => import('./commands/history.js'),
  },
  {
    path: ['edit'],
    args: 'CONTAINER NAME',
    positionals: [2, 2],
    summary: 'edit a value in $VISUAL or $EDITOR (a private file on tmpfs, removed afterwards)',
    details:
      'The value is written to a 0600 file in a new 0700 folder under XDG_RUNTIME_DIR (a tmpfs), the editor runs on it, and ' +
      'the result is stored if it changed, byte for byte. The file (and whatever the editor left beside it) is overwritten and ' +
      'removed afterwards, also after Ctrl-C. Without XDG_RUNTIME_DIR the command refuses unless --insecure-tmp is given.',
    options: {
      ...unlock,
      'insecure-tmp': {
        type: 'boolean',
        help: 'without XDG_RUNTIME_DIR: use the temporary folder, which may be on disk',
      },
    },
    load: () => import('./commands/edit.js'),
  },
  {
    path: ['read'],
    args: 'stash://CONTAINER/NAME',
    positionals: [1, 1],
    summary: 'print one value by its secret reference (as get prints it)',
    details:
      'A reference is stash://CONTAINER/NAME; the same syntax works in stash run (environment values, dotenv files) and stash inject (templates).',
    options: unlock,
    load: () => import('./commands/read.js'),
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
      "0600 file on tmpfs (XDG_RUNTIME_DIR) and passes its path in NAME; the file is removed when CMD ends. --mask passes CMD's " +
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
        help: 'with --file and no XDG_RUNTIME_DIR: use the temporary folder, which may be on disk',
      },
      mask: {
        type: 'boolean',
        help: 'conceal secret values in the output of CMD (its output then goes through a pipe, not the terminal)',
      },
    },
    load: () => import('./commands/run.js'),
  },
  {
    path: ['inject'],
    args: '',
    positionals: [0, 0],
    summary: 'fill a template: every {{ stash://CONTAINER/NAME }} replaced by its value',
    details:
      'The template comes from -i FILE or standard input; the result goes to standard output or -o FILE (written 0600, atomically). ' +
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
    load: () => import('./commands/inject.js'),
  },
  {
    path: ['otp'],
    args: 'CONTAINER NAME',
    positionals: [2, 2],
    summary: 'print the current TOTP code of a seed stored with set --totp',
    details:
      'RFC 6238 with SHA1, SHA256 or SHA512, 6 to 8 digits, any period, as the otpauth URI says. A newline follows only on a terminal; ' +
      'a terminal is also told how long the code stays valid.',
    options: { ...unlock, json, ...CLIP_OPTIONS },
    load: () => import('./commands/otp.js'),
  },
  {
    path: ['ls'],
    args: 'CONTAINER',
    positionals: [1, 1],
    summary: "list a container's entries: name, size, last change (never a value)",
    details:
      'A change time is "-" (null in JSON) for an entry last written by a stash that did not record change times.',
    options: { json, ...unlock },
    load: () => import('./commands/entries.js'),
  },
  {
    path: ['rm'],
    args: 'CONTAINER NAME',
    positionals: [2, 2],
    summary: 'remove one entry from a container (its previous values are kept until rm --purge)',
    details:
      "An unknown NAME is an error (exit 66). The removed value joins the entry's history (stash history, stash restore); " +
      '--purge drops the entry and its whole history (and, with --purge, a NAME that only has a history). ' +
      'The container keeps its key, so keys cached in the agent stay valid.',
    options: {
      ...unlock,
      purge: { type: 'boolean', help: 'drop the previous values too (the entry cannot be restored afterwards)' },
    },
    load: () => import('./commands/entries.js'),
  },
  {
    path: ['mv'],
    args: 'CONTAINER/NAME CONTAINER2/NAME2',
    positionals: [2, 2],
    summary: 'move an entry to another name or container (CONTAINER2/ keeps the name)',
    details:
      'Within one container the move is one write. Across containers the target is written first and the source removed after. ' +
      'An existing target is refused (exit 73) unless --force.',
    options: { ...unlock, force: { type: 'boolean', short: 'f', help: 'replace an existing target entry' } },
    load: () => import('./commands/entry-move.js'),
  },
  {
    path: ['cp'],
    args: 'CONTAINER/NAME CONTAINER2/NAME2',
    positionals: [2, 2],
    summary: 'copy an entry to another name or container (CONTAINER2/ keeps the name)',
    details: 'The value is never printed. An existing target is refused (exit 73) unless --force.',
    options: { ...unlock, force: { type: 'boolean', short: 'f', help: 'replace an existing target entry' } },
    load: () => import('./commands/entry-move.js'),
  },
  {
    path: ['find'],
    args: 'PATTERN',
    positionals: [1, 1],
    summary: 'list CONTAINER/NAME of the entry names that match, across every container (never values)',
    details:
      'PATTERN is a substring, or a glob (* ? [...]) that must match the whole name when it holds one of those characters; case is ignored. ' +
      'Containers open in the agent are searched without a password; the others with the vault key, asked for once at most. ' +
      'Exit status 1 when nothing matched.',
    options: { json, ...unlock },
    load: () => import('./commands/find.js'),
  },
  {
    path: ['import'],
    args: 'FORMAT FILE --into CONTAINER',
    positionals: [2, 2],
    summary: 'import entries from dotenv, json, pass, bitwarden or 1password exports into a container, in one write',
    details:
      'FORMAT: dotenv (a .env file), json (a flat object of names to strings, as env --format json prints), pass (a password-store ' +
      'folder, each .gpg file decrypted with your gpg), bitwarden (its unencrypted JSON export), 1password (its CSV export). ' +
      'A name that is not a valid entry name is mapped (upper case, each run of other characters becomes _, _ before a leading digit, ' +
      '_2, _3... on a clash) and listed; a login becomes TITLE_USERNAME, TITLE_PASSWORD, TITLE_TOTP, TITLE_URL, TITLE_NOTES and ' +
      'TITLE_<FIELD> (docs/cli.md). Every entry is written in one new version of the container, or nothing is. Names that already exist ' +
      'are refused (exit 73) unless --overwrite or --skip-existing. Values are never printed; delete the plaintext export afterwards.',
    options: {
      into: { type: 'string', value: 'CONTAINER', help: 'the container to write to (required; it must exist)' },
      'dry-run': { type: 'boolean', help: 'list what would be written (names, never values) and write nothing' },
      overwrite: { type: 'boolean', help: 'replace entries that already exist' },
      'skip-existing': { type: 'boolean', help: 'keep entries that already exist and import the rest' },
      json,
      ...unlock,
    },
    load: () => import('./commands/import.js'),
  },
  {
    path: ['open'],
    args: 'CONTAINER',
    positionals: [1, 1],
    summary: 'unlock a container into the session agent (default 900 s)',
    details: '--ttl applies to every key this command caches (the vault key too when it had to be unlocked).',
    options: unlock,
    load: () => import('./commands/open.js'),
  },
  {
    path: ['env'],
    args: 'CONTAINER [CONTAINER...] -- CMD [ARGS...]',
    positionals: [1, 64],
    passthrough: true,
    commandOptional: true,
    summary: "run CMD with the containers' entries as environment variables (or print them with --format)",
    details:
      'Each container is opened once. A name held by two containers is an error unless --prefer names the one that wins. ' +
      'SIGINT, SIGTERM and SIGHUP are forwarded to CMD. The exit status is the exit status of CMD, or 128+N when signal N killed it. ' +
      '--format prints the entries instead of running a command (dotenv, json or shell), with a warning on a terminal.',
    options: {
      ...unlock,
      only: { type: 'string', value: 'NAME[,NAME...]', help: 'only these entries' },
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
    load: () => import('./commands/env.js'),
  },
  {
    path: ['doctor'],
    args: '',
    positionals: [0, 0],
    summary: 'check the agent, its security, suspend protection, configuration and the vault',
    details: 'Exit status 0 only when no check failed. Starts the agent if it is not running.',
    options: { json },
    load: () => import('./commands/doctor.js'),
  },
  {
    path: ['completion'],
    args: 'SHELL',
    positionals: [1, 1],
    summary: 'print the completion script for bash, zsh or fish',
    details:
      'bash: add `source <(stash completion bash)` to ~/.bashrc. zsh: `stash completion zsh > "${fpath[1]}/_stash"` (or source it after compinit). ' +
      'fish: `stash completion fish > ~/.config/fish/completions/stash.fish`. Completes commands, options, container and contact names, and the ' +
      'entry names of containers whose key the agent holds; it never asks for a password and never starts the agent.',
    options: {},
    load: () => import('./commands/completion.js'),
  },
];

/** Usage line of one command. */
export function usageOf(command: Command): string {
  const opts = Object.keys(command.options).length > 0 ? ' [options]' : '';
  return `usage: stash ${command.path.join(' ')}${opts}${command.args ? ` ${command.args}` : ''}`;
}

/**
 * The names of a command's positional arguments, in order, from its usage
 * (`CONTAINER NAME` -> ['CONTAINER', 'NAME']): what `missing argument` names.
 */
export function argNames(command: Command): string[] {
  const words = command.args.split(' ');
  const end = words.indexOf('--');
  return (end < 0 ? words : words.slice(0, end)).filter((w) => /^[A-Z][A-Z_0-9]*(\/[A-Z][A-Z_0-9]*)?$/.test(w));
}

/**
 * A likely meant command for mistyped words (`stash gte` -> `get`): the last
 * word is compared with the words that may follow the ones before it. Null
 * when nothing is close (at most 2 edits, and fewer than the word's length).
 */
export function suggestCommand(words: string[]): string | null {
  const prefix = words.slice(0, -1);
  const typo = words[words.length - 1];
  if (typo === undefined) return null;
  const alias = ALIASES[[...prefix, typo].join(' ')];
  if (alias !== undefined) return alias;
  const next = new Set(commandsUnder(prefix).map((c) => c.path[prefix.length]!));
  const guess = nearest(typo, next);
  if (guess === null) return null;
  const path = [...prefix, guess].join(' ');
  // A write is offered for a slip of one key only: `cat` must not become `set`.
  if (WRITES.has(path) && distance(typo.toLowerCase(), guess) > 1) return null;
  return path;
}

/** Words people type for an existing command (pass, gopass, op, coreutils habits). */
const ALIASES: Record<string, string> = {
  cat: 'get',
  show: 'get',
  print: 'get',
  view: 'get',
  reveal: 'get',
  list: 'ls',
  delete: 'rm',
  remove: 'rm',
  del: 'rm',
  unlock: 'open',
  move: 'mv',
  copy: 'cp',
  search: 'find',
  'container ls': 'container list',
  'container delete': 'container rm',
  'container remove': 'container rm',
  'container new': 'container create',
  'container mv': 'container rename',
  'vault contact ls': 'vault contact list',
  'vault sessions ls': 'vault sessions',
  'vault sessions list': 'vault sessions',
};

/** Commands that change or remove something: suggested only for a one-key slip. */
const WRITES = new Set([
  'set',
  'edit',
  'rm',
  'restore',
  'mv',
  'cp',
  'import',
  'vault init',
  'vault passwd',
  'vault contact remove',
  'vault sessions stop',
  'vault identity rotate',
  'vault contact accept-rotation',
  'container create',
  'container rm',
  'container share',
  'container unshare',
  'container accept',
  'container merge',
  'container import',
  'container link',
  'container rename',
]);

/** Longest command path that prefixes argv. */
export function findCommand(argv: string[]): { command: Command; rest: string[] } | undefined {
  let best: Command | undefined;
  for (const command of commands) {
    const matches = command.path.every((word, i) => argv[i] === word);
    if (matches && (!best || command.path.length > best.path.length)) best = command;
  }
  return best ? { command: best, rest: argv.slice(best.path.length) } : undefined;
}

/** Commands whose path starts with `prefix` (for `stash vault`, `stash vault contact`). */
export function commandsUnder(prefix: string[]): Command[] {
  return commands.filter((c) => c.path.length > prefix.length && prefix.every((w, i) => c.path[i] === w));
}

function table(list: Command[]): string[] {
  const words = (c: Command): string => `${c.path.join(' ')}${c.args ? ` ${c.args}` : ''}`;
  const width = Math.max(...list.map((c) => words(c).length), 10);
  return list.map((c) => `  ${words(c).padEnd(width)}  ${c.summary}`);
}

/** Help for a group of commands (`stash vault --help`). */
export function groupHelp(prefix: string[]): string {
  return [
    `usage: stash ${prefix.join(' ')} <command> [options]`,
    '',
    'commands:',
    ...table(commandsUnder(prefix)),
    '',
  ].join('\n');
}

/** The full help of one command: usage, summary, options. */
export function commandHelp(command: Command): string {
  const rows = Object.entries(command.options).map(([name, o]) => {
    const flag = `${o.short ? `-${o.short}, ` : '    '}--${name}${o.value ? ` ${o.value}` : ''}`;
    return [flag, o.help] as const;
  });
  rows.push(['-h, --help', 'show this help']);
  const width = Math.max(...rows.map(([f]) => f.length));
  const lines = [usageOf(command), '', `${command.summary}.`];
  if (command.details) lines.push('', command.details);
  lines.push('', 'options:', ...rows.map(([f, h]) => `  ${f.padEnd(width)}  ${h}`));
  // `vault sessions` runs by itself and is a group too: its help names both.
  const sub = commandsUnder(command.path).filter((c) => c.path.length === command.path.length + 1);
  if (sub.length > 0) lines.push('', 'commands:', ...table(commandsUnder(command.path)));
  lines.push('');
  return lines.join('\n');
}

export function topLevelHelp(): string {
  return [
    'stash: a password-protected secrets vault',
    '',
    'usage: stash <command> [options]',
    '',
    'commands:',
    ...table(commands),
    '',
    'Every command takes --help; stash --version prints the version.',
    'Exit statuses and environment variables are listed in docs/cli.md.',
    '',
  ].join('\n');
}
