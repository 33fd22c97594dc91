/**
 * The command table (its entries in src/cli/command-table/, one file per
 * group): words, usage, options (with their help text) and a lazy
 * `load()`. main.ts parses options strictly from this table before a command's
 * module is imported, so `stash <anything> --help` and usage errors load
 * neither sodium, Koa, the keyring nor the native addon.
 */
import type { Command } from './command-types.js';
import { distance, nearest } from './suggest.js';
import { CONTAINER_COMMANDS } from './command-table/container.js';
import { ENTRY_COMMANDS } from './command-table/entry.js';
import { VAULT_COMMANDS } from './command-table/vault.js';

export const commands: Command[] = [...VAULT_COMMANDS, ...CONTAINER_COMMANDS, ...ENTRY_COMMANDS];

/** Usage line of one command. */
export function usageOf(command: Command): string {
  const opts = Object.keys(command.options).length > 0 ? ' [options]' : '';
  return `usage: stash ${command.path.join(' ')}${opts}${command.args ? ` ${command.args}` : ''}`;
}

/**
 * The names of a command's positional arguments, in order, from its usage
 * (`CONTAINER NAME` -> ['CONTAINER', 'NAME']; `[CONTAINER] PATH` -> ['CONTAINER',
 * 'PATH']), without the brackets of one that may be left out unless `required`:
 * then only those that must be given (['PATH']), what `missing argument` names.
 */
export function argNames(command: Command, required = false): string[] {
  const words = command.args.split(' ');
  const end = words.indexOf('--');
  const names: string[] = [];
  for (const w of end < 0 ? words : words.slice(0, end)) {
    const m = /^(\[?)([A-Z][A-Z_0-9]*(?:\/[A-Z][A-Z_0-9]*)?)\]?$/.exec(w);
    if (m && !(required && m[1] === '[')) names.push(m[2]!);
  }
  return names;
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
