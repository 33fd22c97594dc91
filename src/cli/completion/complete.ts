/**
 * `stash __complete -- WORD... CURRENT`: what the shell scripts of
 * `stash completion` call on every Tab. The words are those after `stash` up
 * to the one being completed (the last, possibly empty). It prints one
 * line saying what to complete, then the candidates that start with CURRENT:
 *
 *   words       the lines that follow are the candidates
 *   files       let the shell complete file names
 *   none        nothing to offer
 *
 * Commands and options come from the command table; container names from
 * the container headers (no key needed); entry names only from a content key
 * the session agent already holds, and contact names only from a cached vault
 * key. It never asks for a password, never starts an agent and never prints
 * an error (a Tab must not scribble on the command line): whatever it cannot
 * learn, it leaves out.
 */
import type { Command } from '../command-types.js';
import { argNames, commands, commandsUnder } from '../registry.js';

export type Completion = { kind: 'words'; items: string[] } | { kind: 'files' } | { kind: 'none' };

/** The sources of names, so the word logic can be tested without a vault. */
export interface NameSource {
  containers(): Promise<string[]>;
  entries(container: string): Promise<string[]>;
  contacts(): Promise<string[]>;
}

type ArgKind = 'container' | 'entry' | 'contact' | 'file' | 'ref' | 'shell' | 'format' | 'none';

const IMPORT_FORMATS = ['dotenv', 'json', 'pass', 'bitwarden', '1password'];

/** What the positional argument `name` (from the usage line) of `command` holds. */
function kindOf(command: Command, name: string, previous: string | undefined): ArgKind {
  const [first, second] = command.path;
  if (name.includes('/')) return 'ref';
  switch (name) {
    case 'CONTAINER':
    case 'OLD':
      return 'container';
    case 'CONTACT':
      return 'contact';
    case 'FILE':
      return 'file';
    case 'PATH':
      // `[CONTAINER] PATH`: an entry path; elsewhere (`vault backup PATH`) a file.
      return previous === 'CONTAINER' ? 'entry' : 'file';
    case 'SHELL':
      return 'shell';
    case 'FORMAT':
      return 'format';
    case 'NAME':
      if (first === 'container') return 'container';
      if (first === 'vault' && second === 'contact') return 'contact';
      return previous === 'CONTAINER' ? 'entry' : 'none';
    default:
      return 'none';
  }
}

/** Values an option takes, by its placeholder. */
function optionValueKind(value: string | undefined): ArgKind | string[] {
  switch (value) {
    case 'FILE':
    case 'TEMPLATE':
      return 'file';
    case 'CONTAINER':
      return 'container';
    case 'FORMAT':
      return ['dotenv', 'json', 'shell'];
    case 'PRESET':
      return ['moderate', 'interactive'];
    case 'SIDE':
      return ['container', 'file'];
    default:
      return 'none';
  }
}

function words(candidates: Iterable<string>, current: string): Completion {
  const items = [...new Set(candidates)].filter((c) => c.startsWith(current)).sort();
  return items.length > 0 ? { kind: 'words', items } : { kind: 'none' };
}

export async function complete(args: string[], names: NameSource): Promise<Completion> {
  const current = args[args.length - 1] ?? '';
  const before = args.slice(0, -1);
  // The command: the longest run of leading words that names commands.
  const path: string[] = [];
  while (
    path.length < before.length &&
    commandsUnder([...path, before[path.length]!]).length + exact([...path, before[path.length]!]).length > 0
  ) {
    path.push(before[path.length]!);
  }
  const command = exact(path)[0];
  const rest = before.slice(path.length);
  if (
    !command ||
    (rest.length === 0 && !current.startsWith('-') && commandsUnder(path).length > 0 && command.positionals[1] === 0)
  ) {
    if (path.length < before.length) return { kind: 'none' }; // an unknown word
    if (current.startsWith('-')) return words(path.length === 0 ? ['--help', '--version'] : ['--help'], current);
    return words(
      commandsUnder(path).map((c) => c.path[path.length]!),
      current,
    );
  }
  if (rest.includes('--') && command.passthrough) return { kind: 'files' };
  // Which option takes the word being completed, and how many positionals came before it.
  const optionTakingValue = (word: string) => {
    const name = word.startsWith('--')
      ? word.slice(2)
      : Object.keys(command.options).find((k) => command.options[k]!.short === word.slice(1));
    const def = name === undefined ? undefined : command.options[name];
    return def?.type === 'string' && !word.includes('=') ? def : undefined;
  };
  const positionals: string[] = [];
  for (let i = 0; i < rest.length; i++) {
    const w = rest[i]!;
    if (w.startsWith('-') && w !== '-') {
      if (optionTakingValue(w)) i++;
      continue;
    }
    positionals.push(w);
  }
  const last = rest[rest.length - 1];
  const takesValue = last?.startsWith('-') && optionTakingValue(last);
  if (takesValue) {
    const kind = optionValueKind(takesValue.value);
    if (Array.isArray(kind)) return words(kind, current);
    return byKind(kind, current, names, positionals);
  }
  if (current.startsWith('-')) {
    return words([...Object.keys(command.options).map((o) => `--${o}`), '--help'], current);
  }
  const argList = argNames(command);
  const index = positionals.length;
  if (index >= command.positionals[1] || argList.length === 0) return { kind: 'none' };
  const at = Math.min(index, argList.length - 1);
  return byKind(kindOf(command, argList[at]!, argList[at - 1]), current, names, positionals);
}

function exact(path: string[]): Command[] {
  return commands.filter((c) => c.path.length === path.length && c.path.every((w, i) => w === path[i]));
}

async function byKind(kind: ArgKind, current: string, names: NameSource, positionals: string[]): Promise<Completion> {
  switch (kind) {
    case 'container':
      return words(await names.containers(), current);
    case 'entry': {
      const container = positionals[positionals.length - 1];
      return container === undefined ? { kind: 'none' } : words(await names.entries(container), current);
    }
    case 'contact':
      return words(await names.contacts(), current);
    case 'file':
      return { kind: 'files' };
    case 'shell':
      return words(['bash', 'zsh', 'fish'], current);
    case 'format':
      return words(IMPORT_FORMATS, current);
    case 'ref': {
      // CONTAINER/NAME: the container first (with its slash), then its entries.
      const slash = current.indexOf('/');
      if (slash < 0)
        return words(
          (await names.containers()).map((c) => `${c}/`),
          current,
        );
      const container = current.slice(0, slash);
      return words(
        (await names.entries(container)).map((e) => `${container}/${e}`),
        current,
      );
    }
    default:
      return { kind: 'none' };
  }
}

/** The protocol line and candidates, as the scripts read them. */
export function render(c: Completion): string {
  return c.kind === 'words' ? `words\n${c.items.join('\n')}\n` : `${c.kind}\n`;
}
