/**
 * `stash completion bash|zsh|fish`: prints the shell's completion script
 * (src/cli/completion/scripts.ts); how to install it is in its first lines,
 * in --help and in docs/cli.md.
 */
import { UsageError } from '../../errors.js';
import { writeStdout } from '../../output-streams.js';
import { SCRIPTS } from '../completion/scripts.js';
import type { Invocation } from '../command-types.js';

export async function run(inv: Invocation): Promise<number> {
  const shell = inv.positionals[0]!;
  const script = SCRIPTS[shell];
  if (script === undefined) throw new UsageError(`no completion for ${JSON.stringify(shell)}: use bash, zsh or fish`);
  await writeStdout(script);
  return 0;
}
