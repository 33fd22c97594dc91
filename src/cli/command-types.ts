/**
 * The shape of a command: its table entry (Command, in src/cli/command-table/)
 * and what its module's run() is given (Invocation). Types only, in a file of
 * their own: the command table and every command import them, and
 * registry.ts imports the table, so were they declared in registry.ts each
 * command would import the registry that (through the table) loads it.
 */
import type { OptionDef } from './options.js';

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
