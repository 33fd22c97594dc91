/**
 * Part of the command table (src/cli/registry.ts): `stash vault ...`, the
 * vault, its recovery key and identity, contacts and the session agent.
 */
import type { Command } from '../command-types.js';
import { json, passwordFile, passwordStdin, ttl, kdf, allowWeak, unlock, server } from './shared-options.js';

export const VAULT_COMMANDS: Command[] = [
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
    load: () => import('../commands/vault-init.js'),
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
    load: () => import('../commands/vault-recovery.js'),
  },
  {
    path: ['vault', 'recovery-key', 'status'],
    args: '',
    positionals: [0, 0],
    summary: 'whether the vault has a recovery key, and since when',
    options: { json },
    load: () => import('../commands/vault-recovery.js'),
  },
  {
    path: ['vault', 'recovery-key', 'create'],
    args: '',
    positionals: [0, 0],
    summary: 'make a (new) recovery key and show it once; asks for the password; an older one stops working',
    options: { 'password-file': passwordFile, 'password-stdin': passwordStdin, json },
    load: () => import('../commands/vault-recovery.js'),
  },
  {
    path: ['vault', 'recovery-key', 'remove'],
    args: '',
    positionals: [0, 0],
    summary: 'remove the recovery key (asks for the password)',
    options: { 'password-file': passwordFile, 'password-stdin': passwordStdin },
    load: () => import('../commands/vault-recovery.js'),
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
    load: () => import('../commands/vault-passwd.js'),
  },
  {
    path: ['vault', 'backup'],
    args: 'FILE',
    positionals: [1, 1],
    summary: 'write the whole vault to one file, still encrypted (restoring it needs the password)',
    details:
      "Holds vault.json, the identity, the contacts, every container, the shared containers' records and the contents of their " +
      'linked files, with a MAC keyed by the vault key. Needs the vault key (agent or password). FILE is written 0600; an existing ' +
      'FILE is replaced only with --force, and only a regular file (not a device, FIFO, socket, folder or symbolic link).',
    options: { ...unlock, force: { type: 'boolean', help: 'replace an existing FILE' } },
    load: () => import('../commands/vault-backup.js'),
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
    load: () => import('../commands/vault-backup.js'),
  },
  {
    path: ['vault', 'identity', 'show'],
    args: '',
    positionals: [0, 0],
    summary: 'show your public keys and fingerprint (to read over the phone)',
    options: { json },
    load: () => import('../commands/vault-identity.js'),
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
    load: () => import('../commands/vault-publish.js'),
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
    load: () => import('../commands/vault-unpublish.js'),
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
    load: () => import('../commands/vault-rotate.js'),
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
    load: () => import('../commands/vault-rotate.js'),
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
    load: () => import('../commands/vault-accept-rotation.js'),
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
    load: () => import('../commands/vault-receive.js'),
  },
  {
    path: ['vault', 'contact', 'list'],
    args: '',
    positionals: [0, 0],
    summary: 'list your contacts',
    options: { json, ...unlock },
    load: () => import('../commands/vault-contact.js'),
  },
  {
    path: ['vault', 'contact', 'show'],
    args: 'NAME',
    positionals: [1, 1],
    summary: 'show one contact and its fingerprint',
    options: { json, ...unlock },
    load: () => import('../commands/vault-contact.js'),
  },
  {
    path: ['vault', 'contact', 'remove'],
    args: 'NAME',
    positionals: [1, 1],
    summary: 'remove a contact',
    options: unlock,
    load: () => import('../commands/vault-contact.js'),
  },
  {
    path: ['vault', 'sessions'],
    args: '',
    positionals: [0, 0],
    summary: 'list the unlocked containers (name, path, expires in)',
    options: { json },
    load: () => import('../commands/sessions.js'),
  },
  {
    path: ['vault', 'sessions', 'lock'],
    args: 'CONTAINER',
    positionals: [1, 1],
    summary: "forget one container's key and the cached vault key that could open it again (by name or path)",
    options: {},
    load: () => import('../commands/sessions.js'),
  },
  {
    path: ['vault', 'sessions', 'lock-all'],
    args: '',
    positionals: [0, 0],
    summary: 'forget every cached key, the vault key included',
    options: {},
    load: () => import('../commands/sessions.js'),
  },
  {
    path: ['vault', 'sessions', 'stop'],
    args: '',
    positionals: [0, 0],
    summary: 'stop the session agent (its keys are wiped)',
    options: {},
    load: () => import('../commands/sessions.js'),
  },
  {
    path: ['vault', 'sessions', 'auto-unlock', 'status'],
    args: '',
    positionals: [0, 0],
    summary: 'whether the vault password is kept in the OS keyring',
    options: { json },
    load: () => import('../commands/auto-unlock.js'),
  },
  {
    path: ['vault', 'sessions', 'auto-unlock', 'enable'],
    args: '',
    positionals: [0, 0],
    summary: 'store the vault password in the OS keyring and use it instead of asking',
    options: { 'password-file': passwordFile, 'password-stdin': passwordStdin },
    load: () => import('../commands/auto-unlock.js'),
  },
  {
    path: ['vault', 'sessions', 'auto-unlock', 'disable'],
    args: '',
    positionals: [0, 0],
    summary: 'stop using the stored password (it stays in the keyring; see forget)',
    options: {},
    load: () => import('../commands/auto-unlock.js'),
  },
  {
    path: ['vault', 'sessions', 'auto-unlock', 'forget'],
    args: '',
    positionals: [0, 0],
    summary: 'delete the stored password from the keyring and disable auto-unlock',
    options: {},
    load: () => import('../commands/auto-unlock.js'),
  },
];
