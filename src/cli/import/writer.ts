/**
 * The one writer of `stash import`: every imported entry (its value and its
 * fields) goes into the container in one updateEntriesOf call, so the
 * container gets one new version holding all of them, or (any error: a path
 * taken, the container full, a shared file changed meanwhile) stays as it
 * was. An entry is judged whole: `--overwrite` replaces its value and its
 * fields (a field the import does not give is removed, into the history as
 * every replaced value is), `--skip-existing` keeps all of it.
 */
import { StashError } from '../../errors.js';
import { wipeEntries } from '../../vault/container-body.js';
import { fieldKey, splitKey } from '../../vault/entry-path.js';
import { readEntriesOf, updateEntriesOf } from '../container-access.js';
import type { Session } from '../session.js';
import type { ContainerName } from '../../vault/names.js';
import type { ImportEntry } from './paths.js';

/** What to do with a name the container already holds. */
export type Policy = 'refuse' | 'overwrite' | 'skip';

export interface PlanRow {
  entry: string;
  /** new: not in the container; replace / skip: there already (by --overwrite / --skip-existing); exists: there already, so refused. */
  action: 'new' | 'replace' | 'skip' | 'exists';
  from: string;
  /** The source's own name when the entry name differs from it (mapped, or _2 after a clash); else null. */
  mappedFrom: string | null;
  /** The entry's fields (names and sources, never values). */
  fields: Array<{ name: string; from: string; mappedFrom: string | null }>;
}

/**
 * Plans the import against the container's current names and, unless
 * `dryRun`, writes it. ENTRY_EXISTS (nothing written) when a name is taken
 * and the policy is 'refuse'; with `dryRun` the plan is returned instead, its
 * taken names marked 'exists'.
 */
export async function commitImport(
  session: Session,
  container: ContainerName,
  entries: readonly ImportEntry[],
  policy: Policy,
  dryRun: boolean,
): Promise<PlanRow[]> {
  return session.withContentKey(container, async (key, info) => {
    const current = await readEntriesOf(session.dir, info, key);
    const existing = new Set(current.keys());
    wipeEntries(current);
    const rows: PlanRow[] = entries.map((n) => ({
      entry: n.path,
      action: !existing.has(n.path)
        ? 'new'
        : policy === 'overwrite'
          ? 'replace'
          : policy === 'skip'
            ? 'skip'
            : 'exists',
      from: n.from,
      mappedFrom: n.mappedFrom,
      fields: n.fields.map((f) => ({ name: f.name, from: f.from, mappedFrom: f.mappedFrom })),
    }));
    const taken = rows.filter((r) => r.action === 'exists').map((r) => r.entry);
    if (dryRun) return rows;
    if (taken.length > 0) {
      const shown =
        taken.length > 20 ? `${taken.slice(0, 20).join(', ')} and ${taken.length - 20} more` : taken.join(', ');
      throw new StashError(
        'ENTRY_EXISTS',
        `${container} already holds ${shown}; nothing was imported (add --overwrite to replace them, or --skip-existing to keep them)`,
      );
    }
    const changes = new Map<string, Buffer | null>();
    entries.forEach((n, i) => {
      if (rows[i]!.action === 'skip') return;
      changes.set(n.path, n.value);
      for (const f of n.fields) changes.set(fieldKey(n.path, f.name), f.value);
    });
    // A replaced entry keeps no field of its old self (the history does).
    for (const k of existing) {
      const { path, field } = splitKey(k);
      if (field !== null && changes.get(path) != null && !changes.has(k)) changes.set(k, null);
    }
    if (changes.size > 0) await updateEntriesOf(session, info, key, changes);
    return rows;
  });
}
