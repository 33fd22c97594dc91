/**
 * `stash generate [--length N | --words N] [--charset SPEC] [--no-symbols] [--json]`:
 * prints a random password or passphrase (generate/generator.ts). Needs no
 * vault and no agent. The value goes to stdout from secure memory; a newline
 * follows only on a terminal, as with `stash get`.
 */
import { writeStdout } from '../../output-streams.js';
import { wipe } from '../../vault/secure.js';
import { generatorFrom } from '../generate/options.js';
import { outJson } from '../output.js';
import type { Invocation } from '../command-types.js';
import { isTerminal } from '../terminal.js';

export async function run(inv: Invocation): Promise<number> {
  const generator = generatorFrom(inv.values);
  const value = generator.next();
  try {
    if (inv.values.json === true) {
      outJson({ value: value.toString('utf8'), bits: generator.bits });
    } else {
      await writeStdout(value);
      if (isTerminal(1)) await writeStdout('\n');
    }
  } finally {
    wipe(value);
  }
  return 0;
}
