/**
 * The environment name of an entry path, for `stash env` (docs/cli.md, "Entry
 * paths and environment names"): a path that is already an environment name
 * (a flat name like API_TOKEN or api_token) is kept as it is, so every
 * container written before paths exports what it did; any other path is
 * upper-cased with every character other than a letter, digit or '_' turned
 * into '_', and a leading digit gets a '_' before it: `web/github.com` gives
 * WEB_GITHUB_COM, `2fa/mail` gives _2FA_MAIL. Fields are never exported.
 */
import { UsageError } from '../errors.js';
import { folderPrefix, validateEntryPath } from '../vault/entry-path.js';
import { FLAT_NAME_RE } from '../vault/names.js';

/** The environment variable that entry `path` becomes. */
export function envNameOf(path: string): string {
  if (FLAT_NAME_RE.test(path)) return path;
  const upper = path.toUpperCase().replace(/[^A-Z0-9_]/g, '_');
  return /^[0-9]/.test(upper) ? `_${upper}` : upper;
}

/** What --only names: entry paths, and folders (a trailing '/') whose entries all go. */
export interface OnlyFilter {
  paths: Set<string>;
  folders: string[];
  /** Each item as given, for the "in none of the containers" error. */
  items: string[];
}

/** --only A,web/,B: each item checked as a path, or a folder when it ends in '/'; null when absent. */
export function onlyOption(raw: unknown): OnlyFilter | null {
  if (raw === undefined) return null;
  const items = String(raw)
    .split(',')
    .map((n) => n.trim())
    .filter((n) => n.length > 0);
  if (items.length === 0)
    throw new UsageError('--only needs one or more entry paths or folders (web/), separated by commas');
  const filter: OnlyFilter = { paths: new Set(), folders: [], items };
  for (const item of items) {
    if (item.endsWith('/')) filter.folders.push(folderPrefix(item));
    else {
      validateEntryPath(item);
      filter.paths.add(item);
    }
  }
  return filter;
}

/** True when `path` passes the filter (no filter passes every path). */
export function onlyTakes(filter: OnlyFilter | null, path: string): boolean {
  return filter === null || filter.paths.has(path) || filter.folders.some((f) => path.startsWith(f));
}

/** The items of the filter that matched none of `paths`. */
export function unmatched(filter: OnlyFilter | null, paths: Iterable<string>): string[] {
  if (filter === null) return [];
  const all = [...paths];
  return filter.items.filter((item) =>
    item.endsWith('/') ? !all.some((p) => p.startsWith(folderPrefix(item))) : !all.includes(item),
  );
}
