/**
 * `stash ls CONTAINER [FOLDER] [--flat] [--json]` and `stash rm CONTAINER
 * PATH [--field NAME] [--purge]`. ls shows each entry's path (as a tree, or
 * flat), size, last change and field names, never a value; rm deletes one
 * entry with its fields, or one field, the value kept in its history
 * (`--purge` drops that too). The content key is unchanged, so keys cached
 * in the agent stay valid.
 * Both work on private and shared containers (container-access.ts).
 */
import { entryNotFound } from '../../vault/containers.js';
import { fieldKey, folderPrefix, validateFieldName } from '../../vault/entry-path.js';
import { type ContainerName, VaultError, wipeEntries } from '../../vault/index.js';
import { historyPolicy, readEntriesOf, updateEntriesOf } from '../container-access.js';
import { entryRows, treeLines, type EntryRow } from '../entry-tree.js';
import { formatTable, note, out, outJson } from '../output.js';
import type { Invocation } from '../command-types.js';
import { entryTarget, listTarget } from '../entry-target.js';
import { Session } from '../session.js';

export async function run(inv: Invocation): Promise<number> {
  const isLs = inv.command.path[0] === 'ls';
  const field = isLs ? null : fieldOption(inv.values.field);
  const listed = isLs ? await listTarget(inv) : null;
  if (listed?.folder) folderPrefix(listed.folder);
  const target = listed ? null : await entryTarget(inv);
  const session = new Session(inv.values);
  try {
    return listed
      ? await list(session, listed.container, listed.folder, {
          json: inv.values.json === true,
          flat: inv.values.flat === true,
        })
      : await remove(session, target!.container, target!.path, field, inv.values.purge === true);
  } finally {
    session.close();
  }
}

/** rm --field NAME: the field's name, checked, or null. */
function fieldOption(raw: unknown): string | null {
  if (raw === undefined) return null;
  validateFieldName(raw);
  return raw;
}

async function list(
  session: Session,
  container: ContainerName,
  folder: string | null,
  opts: { json: boolean; flat: boolean },
): Promise<number> {
  const rows = await session.withContentKey(container, async (key, info): Promise<EntryRow[]> => {
    const entries = await readEntriesOf(session.dir, info, key);
    try {
      return entryRows(entries, container, folder);
    } finally {
      wipeEntries(entries);
    }
  });
  const iso = (t: number): string | null => (t > 0 ? new Date(t).toISOString() : null);
  if (opts.json) {
    outJson(
      rows.map((r) => ({ name: r.path, size: r.size, changedAt: iso(r.changedAt), totp: r.totp, fields: r.fields })),
    );
    return 0;
  }
  if (rows.length === 0) {
    out(`No entries in ${container} yet: add one with \`stash set ${container} NAME\`.`);
    return 0;
  }
  const when = (t: number): string => iso(t)?.replace('T', ' ').slice(0, 19).concat(' UTC') ?? '-';
  // FIELDS and KIND appear once there is something to show in them, so a flat container lists as before.
  const fields = rows.some((r) => r.fields.length > 0);
  const kinds = rows.some((r) => r.totp);
  const cells = (r: EntryRow): string[] => [
    String(r.size),
    when(r.changedAt),
    ...(fields ? [r.fields.length > 0 ? r.fields.join(',') : '-'] : []),
    ...(kinds ? [r.totp ? 'totp' : '-'] : []),
  ];
  const table = opts.flat
    ? rows.map((r) => [r.path, ...cells(r)])
    : treeLines(rows).map((l) => ['  '.repeat(l.depth) + l.label, ...(l.row ? cells(l.row) : [])]);
  const header = ['NAME', 'BYTES', 'CHANGED', ...(fields ? ['FIELDS'] : []), ...(kinds ? ['KIND'] : [])];
  for (const line of formatTable(header, table)) out(line);
  return 0;
}

async function remove(
  session: Session,
  container: ContainerName,
  path: string,
  field: string | null,
  purge: boolean,
): Promise<number> {
  const key = field === null ? path : fieldKey(path, field);
  const changed = await session.withContentKey(container, async (contentKey, info) => {
    if (field !== null && !purge) {
      // A missing field is named with the entry's fields, as get --field names them.
      const entries = await readEntriesOf(session.dir, info, contentKey);
      const missing = entries.has(key) ? null : entryNotFound(container, key, entries.keys());
      wipeEntries(entries);
      if (missing) throw missing;
    }
    return updateEntriesOf(session, info, contentKey, new Map([[key, null]]), { purge: purge ? [key] : [] });
  });
  if (changed.length === 0) {
    throw new VaultError(
      'ENTRY_NOT_FOUND',
      `container ${JSON.stringify(container)} has no entry ${path}${field === null ? '' : ` with a field ${field}`}${purge ? ' and no history of one' : ''}; nothing was removed (see stash ls ${container})`,
    );
  }
  const what = field === null ? path : `field ${field} of ${path}`;
  const { keep } = await historyPolicy();
  note(
    purge
      ? `Removed ${what} and its previous values from ${container}.`
      : keep === 0
        ? `Removed ${what} from ${container} (vault.history_keep = 0: no previous value is kept).`
        : `Removed ${what} from ${container}; its previous values are kept (stash history ${container} ${path}${field === null ? '' : ` --field ${field}`}; rm --purge drops them).`,
  );
  return 0;
}
