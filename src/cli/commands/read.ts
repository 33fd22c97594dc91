/**
 * `stash read stash://CONTAINER/NAME`: one value by its reference, printed as
 * `stash get` prints it (the exact bytes; a newline only on a terminal).
 */
import { writeStdout } from '../../output-streams.js';
import { wipe } from '../../vault/secure.js';
import { readEntryOf } from '../container-access.js';
import { parseRef } from '../refs/reference.js';
import type { Invocation } from '../command-types.js';
import { Session } from '../session.js';
import { isTerminal } from '../terminal.js';

export async function run(inv: Invocation): Promise<number> {
  const ref = parseRef(inv.positionals[0]!);
  const session = new Session(inv.values);
  try {
    const value = await session.withContentKey(ref.container, (key, info) =>
      readEntryOf(session.dir, info, key, ref.key),
    );
    try {
      await writeStdout(value);
      if (isTerminal(1)) await writeStdout('\n');
    } finally {
      wipe(value);
    }
    return 0;
  } finally {
    session.close();
  }
}
