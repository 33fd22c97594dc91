/**
 * `stash mv C/PATH C2/PATH2`, `stash mv C FROM TO` and the same for `cp`
 * (entry-spots.ts reads the arguments): an entry with its fields, or a folder
 * with every entry under it. The values go from one container to the other
 * in secure memory, never printed. Within one container a move is one write
 * (the targets set, the sources deleted together), and the history of each
 * moved value and field goes with it; across containers the target is
 * written first and the source deleted after, so a failure in between leaves
 * a copy in both, never the value in neither. The source then keeps the
 * history, as after rm: previous values never go to another container, whose
 * members may not be the ones who could read them.
 */
import { StashError } from '../../errors.js';
import { wipeEntries, type Entries } from '../../vault/container-body.js';
import { entryPaths, fieldKey, splitKey } from '../../vault/entry-path.js';
import { secureCopy, wipe } from '../../vault/secure.js';
import { readEntriesOf, updateEntriesOf } from '../container-access.js';
import { parseMoveArgs, planMoves, spotText, type Spot, type Target } from '../entry-spots.js';
import { note } from '../output.js';
import type { Invocation } from '../command-types.js';
import { Session } from '../session.js';

export async function run(inv: Invocation): Promise<number> {
  const move = inv.command.path[0] === 'mv';
  const { from, to } = parseMoveArgs(inv.positionals);
  const force = inv.values.force === true;
  const session = new Session(inv.values);
  const values = new Map<string, Buffer>();
  try {
    const pairs = await session.withContentKey(from.container, async (key, info) => {
      const entries = await readEntriesOf(session.dir, info, key);
      try {
        const planned = planMoves([...entries.keys()], from, to);
        for (const [source] of planned) values.set(source, secureCopy(entries.get(source)!));
        return planned;
      } finally {
        wipeEntries(entries);
      }
    });
    const sameContainer = from.container === to.container;
    await session.withContentKey(to.container, async (key, info) => {
      const entries = await readEntriesOf(session.dir, info, key);
      let changes: Map<string, Buffer | null>;
      try {
        changes = targetChanges(entries, pairs, values, to.container, move, force);
      } finally {
        wipeEntries(entries);
      }
      if (move && sameContainer) for (const [source] of pairs) changes.set(source, null);
      await updateEntriesOf(session, info, key, changes, move && sameContainer ? { moves: pairs } : {});
    });
    if (move && !sameContainer) {
      await session.withContentKey(from.container, (key, info) =>
        updateEntriesOf(session, info, key, new Map(pairs.map(([source]) => [source, null]))),
      );
    }
    note(summary(move, from, to, pairs));
    return 0;
  } finally {
    for (const v of values.values()) wipe(v);
    session.close();
  }
}

/**
 * The writes at the target: every moved key set, and (with --force) the
 * fields of a replaced entry that the moved one does not have removed, so
 * the entry at the target is the moved one, whole. ENTRY_EXISTS, naming the
 * targets that exist, without --force.
 */
function targetChanges(
  target: Entries,
  pairs: ReadonlyArray<readonly [string, string]>,
  values: ReadonlyMap<string, Buffer>,
  container: string,
  move: boolean,
  force: boolean,
): Map<string, Buffer | null> {
  const changes = new Map<string, Buffer | null>(pairs.map(([source, dest]) => [dest, values.get(source)!]));
  const replaced = entryPaths(changes.keys()).filter((p) => target.has(p));
  if (replaced.length > 0 && !force) {
    const shown = replaced.slice(0, 5).map((p) => spotText(container, p));
    const more = replaced.length > 5 ? ` and ${replaced.length - 5} more` : '';
    throw new StashError(
      'ENTRY_EXISTS',
      `${shown.join(', ')}${more} already exist${replaced.length === 1 ? 's' : ''}; nothing was ${move ? 'moved' : 'copied'} (--force replaces ${replaced.length === 1 ? 'it' : 'them'})`,
    );
  }
  const kept = new Set(replaced);
  for (const key of target.keys()) {
    const { path, field } = splitKey(key);
    if (field !== null && kept.has(path) && !changes.has(fieldKey(path, field))) changes.set(key, null);
  }
  return changes;
}

/** "Moved work/web/github.com to home/web/github.com." or "Copied work/web/ to work/sites/ (3 entries)." */
function summary(move: boolean, from: Spot, to: Target, pairs: ReadonlyArray<readonly [string, string]>): string {
  const verb = move ? 'Moved' : 'Copied';
  const dest = pairs.find(([source]) => source === from.path)?.[1];
  if (!from.folder) return `${verb} ${spotText(from.container, from.path)} to ${spotText(to.container, dest!)}.`;
  const count = entryPaths(pairs.map(([source]) => source)).length;
  const folder = to.path === null ? from.path : to.folder ? to.path : `${to.path}/`;
  return `${verb} ${spotText(from.container, from.path)} to ${spotText(to.container, folder)} (${count} entr${count === 1 ? 'y' : 'ies'}).`;
}
