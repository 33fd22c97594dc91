/**
 * Part of the command table (src/cli/registry.ts): `stash container ...`,
 * containers and sharing them with a team.
 */
import type { Command } from '../command-types.js';
import { json, unlock } from './shared-options.js';

export const CONTAINER_COMMANDS: Command[] = [
  {
    path: ['container', 'create'],
    args: 'NAME',
    positionals: [1, 1],
    summary: 'create an empty container',
    options: unlock,
    load: () => import('../commands/container.js'),
  },
  {
    path: ['container', 'list'],
    args: '',
    positionals: [0, 0],
    summary: 'list the containers (no password needed)',
    options: { json },
    load: () => import('../commands/container.js'),
  },
  {
    path: ['container', 'rm'],
    args: 'NAME',
    positionals: [1, 1],
    summary: 'delete a container and all its entries',
    details:
      'Asks to confirm on a terminal; elsewhere --force is required. A linked shared container is only unlinked: its file is kept.',
    options: { force: { type: 'boolean', short: 'f', help: 'do not ask for confirmation' } },
    load: () => import('../commands/container.js'),
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
    load: () => import('../commands/container-rename.js'),
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
    load: () => import('../commands/container-share.js'),
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
    load: () => import('../commands/container-share.js'),
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
    load: () => import('../commands/container-exposure.js'),
  },
  {
    path: ['container', 'members'],
    args: 'NAME',
    positionals: [1, 1],
    summary: 'owner, members with names and fingerprints, who wrote the current version and when',
    details: 'Names come from your contacts, so the vault key is needed.',
    options: { json, ...unlock },
    load: () => import('../commands/container-share.js'),
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
    load: () => import('../commands/container-share.js'),
  },
  {
    path: ['container', 'merge'],
    args: 'NAME FILE',
    positionals: [2, 2],
    summary: 'merge another version of a shared container (after concurrent edits) into a new version',
    details:
      'For after a divergence refusal (84), e.g. a git conflict: FILE is the other version (git show :3:PATH > FILE). ' +
      'The new version holds the changes of both and is accepted by every member. With --base (the version both grew from: ' +
      'git show :1:PATH), only an entry or field both sides changed differently (changed, added or removed) is a conflict, and an entry ' +
      'removed on one side and left alone on the other is removed. Without it, an entry both versions hold with different values is one, ' +
      'and an entry deleted on one side and kept on the other is kept. A conflict is refused unless --prefer says which side wins ' +
      "(the losing value goes into that entry's history). The histories of both versions are united, newest first, up to vault.history_keep per entry.",
    options: {
      base: {
        type: 'string',
        value: 'FILE',
        help: 'the common version both sides grew from, for a three-way merge (git show :1:PATH > FILE)',
      },
      prefer: {
        type: 'string',
        value: 'SIDE',
        help: "which side wins an entry both versions changed: 'container' (NAME's file) or 'file' (FILE)",
      },
      ...unlock,
    },
    load: () => import('../commands/container-merge.js'),
  },
  {
    path: ['container', 'merge-driver'],
    args: 'BASE OURS THEIRS',
    positionals: [3, 3],
    summary: "git's merge driver for shared container files (.gitattributes: *.stash merge=stash)",
    details:
      "Install once per repository: a line '*.stash merge=stash' in .gitattributes, and " +
      "git config merge.stash.driver 'stash container merge-driver %O %A %B'. git then merges the two sides of a shared container " +
      'entry by entry against their common version, and writes the result, signed by you, for git to commit. An entry both sides changed ' +
      'is a conflict: git records one, the file keeps your version, and the message names the entries and says how to finish with ' +
      'stash container merge. The vault key comes from the session agent, else the password (a terminal prompt, or --password-file); ' +
      'when it cannot be had, the file is left as a conflict too.',
    options: unlock,
    load: () => import('../commands/container-merge.js'),
  },
  {
    path: ['container', 'export'],
    args: 'NAME FILE',
    positionals: [2, 2],
    summary: 'write a shared container to FILE (a copy to hand on, or an update of an older copy)',
    details:
      'An existing FILE must hold an older version of the same container; a newer or diverged one is refused, and so is a ' +
      'device, FIFO, socket, folder or symbolic link. No password is needed.',
    options: {},
    load: () => import('../commands/container-transfer.js'),
  },
  {
    path: ['container', 'import'],
    args: 'FILE',
    positionals: [1, 1],
    summary: 'copy a shared container file into the vault (or update the copy)',
    details:
      'You must be one of its recipients, and its owner you or one of your contacts. NAME defaults to the file name without .stash.',
    options: { name: { type: 'string', value: 'NAME', help: 'the container name in this vault' }, ...unlock },
    load: () => import('../commands/container-transfer.js'),
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
    load: () => import('../commands/container-transfer.js'),
  },
];
