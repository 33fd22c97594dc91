/**
 * The one writer of `stash import`: every imported entry goes into the
 * container in one updateEntriesOf call, so the container gets one new
 * version holding all of them, or (any error: a name taken, the container
 * full, a shared file changed meanwhile) stays as it was.
 */
import { StashError } from '../../errors.js';
import { wipeEntries } from '../../vault/container-body.js';
import { readEntriesOf, updateEntriesOf } from '../container-access.js';
import type { Session } from '../session.js';
import type { ContainerName } from '../../vault/names.js';
import type { Named } from './names.js';

/** What to do with a name the container already holds. */
export type Policy = 'refuse' | 'overwrite' | 'skip';

export interface PlanRow {
  entry: string;
  /** new: not in the container; replace / skip: there already (by --overwrite / --skip-existing); exists: there already, so refused. */
  action: 'new' | 'replace' | 'skip' | 'exists';
  from: string;
  /** The source's own name when the entry name differs from it (mapped, or _2 after a clash); else null. */
  mappedFrom: string | null;
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
  named: readonly Named[],
  policy: Policy,
  dryRun: boolean,
): Promise<PlanRow[]> {
  return session.withContentKey(container, async (key, info) => {
    const current = await readEntriesOf(session.dir, info, key);
    const existing = new Set(current.keys());
    wipeEntries(current);
    const rows: PlanRow[] = named.map((n) => ({
      entry: n.entry,
      action: !existing.has(n.entry)
        ? 'new'
        : policy === 'overwrite'
          ? 'replace'
          : policy === 'skip'
            ? 'skip'
            : 'exists',
      from: n.from,
      mappedFrom: n.entry === n.name ? null : n.name,
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
    const changes = new Map<string, Buffer>();
    named.forEach((n, i) => {
      if (rows[i]!.action !== 'skip') changes.set(n.entry, n.value);
    });
    if (changes.size > 0) await updateEntriesOf(session, info, key, changes);
    return rows;
  });
}
