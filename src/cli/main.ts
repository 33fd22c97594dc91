/**
 * `stash` entry: internal agent modes first, then ordinary commands. Errors are
 * caught here only: printed as `stash: <message>` and mapped to an exit status.
 */
import { errorCode, errorMessage, UsageError } from '../errors.js';
import { guardOutputStreams, writeText } from '../output-streams.js';
import { parseOptions } from './args.js';
import { exitCodeFor, ExitCode } from './exit-codes.js';
import { terminalSafe } from './output.js';
import { toParseSpec } from './options.js';
import { hardenCli } from './harden.js';
import { preloadSodium } from './sodium-preload.js';
import { didYouMean } from './suggest.js';
import {
  argNames,
  commandHelp,
  commands,
  commandsUnder,
  findCommand,
  groupHelp,
  suggestCommand,
  topLevelHelp,
  usageOf,
} from './registry.js';
import type { Command, Invocation } from './command-types.js';

/** Runs the CLI with argv (without node and script); sets process.exitCode. */
export async function main(argv: string[]): Promise<void> {
  // Before anything writes: a closed or full stdout/stderr never crashes (output-streams.ts).
  guardOutputStreams('stash');
  // The agent and the clipboard helper load sodium (the secure channel) at once: the short way in, as below.
  if (argv[0] === '__agent' || argv[0] === '__clip-clear') preloadSodium();
  // The agent modes are dispatched before any ordinary parsing (spec).
  if (argv[0] === '__agent') {
    const { runAgentProcess } = await import('../agent/main.js');
    await runAgentProcess(argv.slice(1));
    return;
  }
  if (argv[0] === '__clip-clear') {
    // The clipboard clear of `get --clip`, detached (src/cli/clipboard/helper.ts).
    const { runClipHelper } = await import('./clipboard/helper.js');
    await runClipHelper(argv.slice(1));
    return;
  }
  if (argv[0] === '__complete') {
    // What the scripts of `stash completion` ask on every Tab (src/cli/completion/).
    const { runComplete } = await import('./completion/vault-names.js');
    await runComplete(argv.slice(1));
    return;
  }
  if (argv[0] === '__agent_security_check') {
    const { runSecurityCheck } = await import('../agent/security-check.js');
    process.exitCode = await runSecurityCheck(argv.slice(1));
    return;
  }
  if (process.env.STASH_TEST_COUNT_VALIDATIONS === '1') await countValidations();
  try {
    process.exitCode = await dispatch(argv);
  } catch (err) {
    const code = errorCode(err);
    writeText('stderr', `stash: ${terminalSafe(errorMessage(err) + misspeltHint(err))}\n`);
    if (process.env.STASH_DEBUG === '1' && err instanceof Error && err.stack) writeText('stderr', `${err.stack}\n`);
    process.exitCode = exitCodeFor(code);
  }
}

/**
 * Tests only (docs/testing.md): print how many times each name validator ran,
 * as the process exits, so a suite can prove a command parses a name once.
 */
async function countValidations(): Promise<void> {
  const { validationCount } = await import('../vault/validation-count.js');
  process.on('exit', () => writeText('stderr', `stash-test: validations ${JSON.stringify(validationCount)}\n`));
}

/** "; did you mean X?" for a container or entry name that was not found (vault errors carry the names). */
function misspeltHint(err: unknown): string {
  const misspelt = (err as { misspelt?: { word: string; candidates: string[] } } | null)?.misspelt;
  return misspelt ? didYouMean(misspelt.word, misspelt.candidates) : '';
}

const isHelp = (a: string): boolean => a === '--help' || a === '-h';
const TOP_LEVEL_OPTIONS = ['--help', '--version'];

async function dispatch(argv: string[]): Promise<number> {
  const [first] = argv;
  if (first === undefined || isHelp(first) || first === 'help') {
    if (first === 'help' && argv[1] !== undefined) return dispatch([...argv.slice(1), '--help']);
    writeText('stdout', topLevelHelp());
    return first === undefined ? ExitCode.usage : ExitCode.ok;
  }
  if (first === '--version' || first === '-V') {
    if (argv[1] !== undefined)
      throw new UsageError(`unexpected argument '${argv[1]}' after ${first} (see stash --help)`);
    const { readVersion } = await import('../version.js');
    writeText('stdout', `stash ${readVersion()}\n`);
    return ExitCode.ok;
  }
  if (first.startsWith('-')) {
    // Only --help and --version come before a command; name the option, not an empty command.
    throw new UsageError(
      `unknown option '${first}'${didYouMean(first, TOP_LEVEL_OPTIONS, (o) => `'${o}'`)} (see stash --help)`,
    );
  }
  const found = findCommand(argv);
  if (!found || isUnknownSubcommand(found.command, found.rest)) return groupOrUnknown(argv);
  const inv = parseInvocation(found.command, found.rest);
  if (inv === 'help') {
    writeText('stdout', commandHelp(found.command));
    return ExitCode.ok;
  }
  // Past parsing and help: the command is about to run, and nearly every command needs sodium.
  preloadSodium();
  // Before the command can decrypt anything: no core file, no same-user ptrace (harden.ts).
  await hardenCli();
  const mod = await found.command.load();
  return mod.run(inv);
}

/**
 * `stash vault sessions frob`: the longest match (`vault sessions`) takes no
 * arguments and has subcommands, so a following word is a mistyped
 * subcommand. After a command without subcommands (`stash doctor extra`) the
 * word is a surplus argument, reported as such by parseInvocation.
 */
function isUnknownSubcommand(command: Command, rest: string[]): boolean {
  const [next] = rest;
  return (
    next !== undefined &&
    !next.startsWith('-') &&
    command.positionals[1] === 0 &&
    commandsUnder(command.path).length > 0
  );
}

/** `stash vault` (a group without its subcommand) or a word that is no command. */
function groupOrUnknown(argv: string[]): number {
  const words: string[] = [];
  for (const a of argv) {
    if (a.startsWith('-')) break;
    words.push(a);
  }
  let prefix = words;
  while (prefix.length > 0 && commandsUnder(prefix).length === 0) prefix = prefix.slice(0, -1);
  const wantsHelp = argv.some(isHelp);
  if (prefix.length > 0 && prefix.length === words.length) {
    if (wantsHelp) {
      writeText('stdout', groupHelp(prefix));
      return ExitCode.ok;
    }
    const group = `stash ${prefix.join(' ')}`;
    const option = argv[words.length];
    if (option !== undefined) {
      throw new UsageError(
        `unknown option '${option}': '${group}' needs one of its commands first (see ${group} --help)`,
      );
    }
    throw new UsageError(`missing command: '${group}' needs one of these\n${groupHelp(prefix)}`);
  }
  // One line and a hint, as git and gh do: the whole help would bury the mistake.
  const shown = words.slice(0, prefix.length + 1).join(' ');
  const guess = suggestCommand(words.slice(0, prefix.length + 1));
  const hint = `see stash ${prefix.length > 0 ? `${prefix.join(' ')} ` : ''}--help`;
  throw new UsageError(`unknown command '${shown}'${guess ? `; did you mean 'stash ${guess}'?` : ''} (${hint})`);
}

/** Strict parse of a command's arguments; 'help' when --help/-h comes before `--`. */
function parseInvocation(command: Command, args: string[]): Invocation | 'help' {
  const dash = args.indexOf('--');
  const own = dash >= 0 ? args.slice(0, dash) : args;
  const rest = dash >= 0 ? args.slice(dash + 1) : [];
  if (own.some(isHelp)) return 'help';
  const usage = usageOf(command);
  if (dash >= 0 && !command.passthrough) {
    // `stash get -- -x NAME` style: positionals after `--` are still positionals.
    own.push(...rest.splice(0));
  }
  const parsed = parseOptions(
    own,
    toParseSpec(command.options),
    `${usage}\n(see stash ${command.path.join(' ')} --help)`,
  );
  const [min, max] = command.positionals;
  const n = parsed.positionals.length;
  if (n < min) {
    const missing = argNames(command, true).slice(n, min);
    throw new UsageError(`missing argument${missing.length > 1 ? 's' : ''}: ${missing.join(' ')}\n${usage}`);
  }
  if (n > max) {
    const hint = command.passthrough ? ' (put -- before the command to run)' : '';
    throw new UsageError(`unexpected argument '${parsed.positionals[max]}'${hint}\n${usage}`);
  }
  if (command.passthrough && !command.commandOptional && (dash < 0 || rest.length === 0))
    throw new UsageError(`missing -- CMD: the command to run\n${usage}`);
  const values: Invocation['values'] = {};
  for (const [k, v] of Object.entries(parsed.values)) {
    if (typeof v === 'string' || typeof v === 'boolean') values[k] = v;
    else if (Array.isArray(v)) values[k] = v.map(String);
  }
  return { command, values, positionals: parsed.positionals, rest };
}

export { commands };
