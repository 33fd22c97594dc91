/**
 * What `stash ls` shows of a container: one row per entry path (never a
 * stored PATH#FIELD key), with its size, change time, field names and kind,
 * laid out as a tree (folders as rows of their own, entries indented by
 * depth, as `tree` and `pass ls` show a password store) or flat (full paths).
 * Pure: the entries are read and wiped by the command.
 */
import { StashError } from '../errors.js';
import { changeTime, type Entries } from '../vault/container-body.js';
import { entryPaths, fieldKey, folderPrefix, splitKey } from '../vault/entry-path.js';
import { byCodeUnits } from '../vault/names.js';
import { isTotpValue } from './totp/otpauth.js';

/** One entry of a listing. */
export interface EntryRow {
  /** The full path. */
  path: string;
  /** Bytes of the value. */
  size: number;
  /** 0 when unknown (written by a stash that did not record change times). */
  changedAt: number;
  /** Field names, in code-unit order. */
  fields: string[];
  /** A TOTP seed, as value or as its `totp` field (`stash otp` prints its code). */
  totp: boolean;
}

/**
 * The entries of `entries` (all, or those under `folder`: `web` or `web/`),
 * in code-unit order of their paths. ENTRY_NOT_FOUND when a folder is given
 * and no entry lies under it.
 */
export function entryRows(entries: Entries, container: string, folder: string | null): EntryRow[] {
  const fields = new Map<string, string[]>();
  for (const key of entries.keys()) {
    const { path, field } = splitKey(key);
    if (field !== null) fields.set(path, [...(fields.get(path) ?? []), field]);
  }
  const prefix = folder === null ? '' : folderPrefix(folder);
  const paths = entryPaths(entries.keys()).filter((p) => p.startsWith(prefix));
  if (folder !== null && paths.length === 0) throw emptyFolder(entries, container, prefix);
  return paths.map((path) => {
    const value = entries.get(path)!;
    const totpField = entries.get(fieldKey(path, 'totp'));
    return {
      path,
      size: value.length,
      changedAt: changeTime(entries, path),
      fields: (fields.get(path) ?? []).sort(byCodeUnits),
      totp: isTotpValue(value) || (totpField !== undefined && isTotpValue(totpField)),
    };
  });
}

/** ENTRY_NOT_FOUND for a folder with no entry under it, naming the top folders there are. */
function emptyFolder(entries: Entries, container: string, prefix: string): StashError {
  const paths = entryPaths(entries.keys());
  const bare = prefix.slice(0, -1);
  const tops = [...new Set(paths.filter((p) => p.includes('/')).map((p) => `${p.slice(0, p.indexOf('/'))}/`))];
  const hint = paths.includes(bare)
    ? `; ${bare} is an entry, not a folder (stash get ${container} ${bare})`
    : tops.length > 0
      ? ` (its top folders: ${tops.join(', ')})`
      : ' (it has no folders)';
  return new StashError(
    'ENTRY_NOT_FOUND',
    `container ${JSON.stringify(container)} has no entry under ${prefix}${hint}`,
  );
}

/** One line of a tree listing: a folder (row null) or an entry, and its depth below the listing's root. */
export interface TreeLine {
  /** The last segment, with a trailing '/' for a folder. */
  label: string;
  depth: number;
  row: EntryRow | null;
}

/**
 * `rows` (sorted by path) as a tree: each folder once, before what it holds,
 * then its entries and folders in code-unit order of their paths, so an entry
 * `web` and a folder `web/` are both listed, the entry first.
 */
export function treeLines(rows: readonly EntryRow[]): TreeLine[] {
  const lines: TreeLine[] = [];
  let open: string[] = []; // the folders of the previous row
  for (const row of rows) {
    const segments = row.path.split('/');
    const folders = segments.slice(0, -1);
    let same = 0;
    while (same < folders.length && same < open.length && folders[same] === open[same]) same++;
    for (let d = same; d < folders.length; d++) lines.push({ label: `${folders[d]}/`, depth: d, row: null });
    lines.push({ label: segments[segments.length - 1]!, depth: folders.length, row });
    open = folders;
  }
  return lines;
}
