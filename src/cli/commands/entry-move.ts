/**
 * `stash mv C/NAME C2/NAME2` and `stash cp C/NAME C2/NAME2`. The value goes
 * from one container to the other in secure memory, never printed. Within
 * one container a move is one write (set NAME2, delete NAME together), and
 * NAME's history goes to NAME2 with it; across containers the target is
 * written first and the source deleted after, so a failure in between leaves
 * a copy in both, never the value in neither. The source then keeps NAME's
 * history, as after rm: previous values never go to another container,
 * whose members may not be the ones who could read them.
 */
import { StashError, UsageError } from '../../errors.js';
import { type ContainerName, validateContainerName, validateEntryName } from '../../vault/names.js';
import { wipe } from '../../vault/secure.js';
import { wipeEntries } from '../../vault/container-body.js';
import { readEntriesOf, readEntryOf, updateEntriesOf } from '../container-access.js';
import { note } from '../output.js';
import type { Invocation } from '../command-types.js';
import { Session } from '../session.js';

interface Spot {
  container: ContainerName;
  name: string;
}

/** CONTAINER/NAME; for the target NAME may be left out (`C2/`) to keep the source's name. */
function parseSpot(text: string, what: 'source' | 'target', fallbackName?: string): Spot {
  const parts = text.split('/');
  if (parts.length !== 2 || parts[0] === '') {
    throw new UsageError(
      `the ${what} ${JSON.stringify(text)} is not CONTAINER/NAME${what === 'target' ? ' (or CONTAINER/ to keep the name)' : ''}`,
    );
  }
  const [container, given] = parts as [string, string];
  const name = given === '' && fallbackName !== undefined ? fallbackName : given;
  validateContainerName(container);
  validateEntryName(name);
  return { container, name };
}

export async function run(inv: Invocation): Promise<number> {
  const move = inv.command.path[0] === 'mv';
  const from = parseSpot(inv.positionals[0]!, 'source');
  const to = parseSpot(inv.positionals[1]!, 'target', from.name);
  if (from.container === to.container && from.name === to.name)
    throw new UsageError(`${from.container}/${from.name} is the source and the target`);
  const force = inv.values.force === true;
  const session = new Session(inv.values);
  try {
    const value = await session.withContentKey(from.container, (key, info) =>
      readEntryOf(session.dir, info, key, from.name),
    );
    try {
      const sameContainer = from.container === to.container;
      await session.withContentKey(to.container, async (key, info) => {
        const entries = await readEntriesOf(session.dir, info, key);
        const exists = entries.has(to.name);
        wipeEntries(entries);
        if (exists && !force) {
          throw new StashError(
            'ENTRY_EXISTS',
            `${to.container}/${to.name} already exists; nothing was ${move ? 'moved' : 'copied'} (--force replaces it)`,
          );
        }
        const changes = new Map<string, Buffer | null>([[to.name, value]]);
        if (move && sameContainer) changes.set(from.name, null);
        await updateEntriesOf(
          session,
          info,
          key,
          changes,
          move && sameContainer ? { moves: [[from.name, to.name]] } : {},
        );
      });
      if (move && !sameContainer) {
        await session.withContentKey(from.container, (key, info) =>
          updateEntriesOf(session, info, key, new Map([[from.name, null]])),
        );
      }
    } finally {
      wipe(value);
    }
    note(`${move ? 'Moved' : 'Copied'} ${from.container}/${from.name} to ${to.container}/${to.name}.`);
    return 0;
  } finally {
    session.close();
  }
}
