/**
 * Entry paths and fields. An entry is named by a path of segments separated
 * by '/' (`web/github.com`, `work/aws/prod`); a flat name is a one-segment
 * path, so every name of an older container is still a path. An entry holds
 * its value and optional named fields (`username`, `url`, `notes`, `totp`, any
 * lower-case name). A field is stored beside the value under the key
 * `PATH#FIELD` ('#' is in no segment), so it has the value's storage, history,
 * change time and wipe (docs/container-format.md).
 */
import { VaultError } from './errors.js';
import { describe } from './name-text.js';
import { validationCount } from './validation-count.js';

declare const entryPathBrand: unique symbol;

/**
 * An entry path that passed validateEntryPath: made only by parseEntryPath
 * (or that assertion), so what takes one need not check it again (as
 * names.ts's ContainerName).
 */
export type EntryPath = string & { readonly [entryPathBrand]: true };

/** Longest entry path, in bytes (ASCII: characters). */
export const MAX_PATH_BYTES = 256;
/** Longest segment of a path. */
export const MAX_SEGMENT_BYTES = 128;
/** One segment: letters, digits, '.', '-', '_', '@'. */
const SEGMENT_RE = /^[A-Za-z0-9._@-]+$/;
/** Field names: a lower-case letter, then lower-case letters, digits, '_' or '-'; 1..32 characters. */
export const FIELD_NAME_RE = /^[a-z][a-z0-9_-]{0,31}$/;
/** Separates an entry path from a field name in a stored key and in a reference. */
export const FIELD_SEPARATOR = '#';

/** Why `text` is not an entry path, or null when it is one. */
export function entryPathProblem(text: string): string | null {
  if (text.length === 0) return 'it is empty';
  if (text.length > MAX_PATH_BYTES) return `it is ${text.length} characters long; a path has at most ${MAX_PATH_BYTES}`;
  if (text.startsWith('/')) return "it starts with '/': paths are relative to the container";
  if (text.endsWith('/')) return "it ends with '/', which names a folder, not an entry";
  for (const segment of text.split('/')) {
    if (segment.length === 0) return "it has an empty segment ('//')";
    if (segment === '..' || segment === '.') return `it has a segment ${JSON.stringify(segment)}`;
    if (segment.length > MAX_SEGMENT_BYTES)
      return `a segment is ${segment.length} characters long; the most is ${MAX_SEGMENT_BYTES}`;
    if (!SEGMENT_RE.test(segment)) {
      const bad = [...segment].find((c) => !SEGMENT_RE.test(c))!;
      return `it holds ${JSON.stringify(bad)}; a segment has only letters, digits, '.', '-', '_' and '@'`;
    }
  }
  return null;
}

/** True when `text` is a valid entry path. */
export function isEntryPath(text: string): boolean {
  return entryPathProblem(text) === null;
}

/** `text` as an EntryPath; INVALID_NAME, saying why, unless it is an entry path. */
export function parseEntryPath(text: unknown): EntryPath {
  validateEntryPath(text);
  return text;
}

/** Throws INVALID_NAME, saying why, unless `name` is an entry path (then it is an EntryPath). */
export function validateEntryPath(name: unknown): asserts name is EntryPath {
  validationCount.entryPath++;
  const problem = typeof name === 'string' ? entryPathProblem(name) : `it is not text (${typeof name})`;
  if (problem !== null)
    throw new VaultError(
      'INVALID_NAME',
      `invalid entry name ${describe(name)}: ${problem} (an entry name is a path like web/github.com: segments of letters, digits, '.', '-', '_', '@' separated by '/')`,
    );
}

/** Throws INVALID_NAME unless `name` is a field name. */
export function validateFieldName(name: unknown): asserts name is string {
  if (typeof name !== 'string' || !FIELD_NAME_RE.test(name))
    throw new VaultError(
      'INVALID_NAME',
      `invalid field name ${describe(name)}: use 1-32 lower-case letters, digits, '_' or '-', starting with a letter (like username or url)`,
    );
}

/** The stored key of field `field` of entry `path`. */
export function fieldKey(path: string, field: string): string {
  return `${path}${FIELD_SEPARATOR}${field}`;
}

/** A stored key split into its entry path and field (null for the value itself). */
export function splitKey(key: string): { path: string; field: string | null } {
  const at = key.indexOf(FIELD_SEPARATOR);
  return at < 0 ? { path: key, field: null } : { path: key.slice(0, at), field: key.slice(at + 1) };
}

/** True when `key` is a stored key: an entry path, or an entry path, '#' and a field name. */
export function isStoredKey(key: string): boolean {
  const { path, field } = splitKey(key);
  return isEntryPath(path) && (field === null || FIELD_NAME_RE.test(field));
}

/** Throws INVALID_NAME unless `key` is a stored key (a path, or a path's field). */
export function validateStoredKey(key: unknown): asserts key is string {
  if (typeof key !== 'string') return validateEntryPath(key);
  const { path, field } = splitKey(key);
  validateEntryPath(path);
  if (field !== null) validateFieldName(field);
}

/** The fields of entry `path` among `keys`, by name, in code-unit order. */
export function fieldsOf(keys: Iterable<string>, path: string): string[] {
  const prefix = `${path}${FIELD_SEPARATOR}`;
  const out: string[] = [];
  for (const key of keys) if (key.startsWith(prefix)) out.push(key.slice(prefix.length));
  return out.sort();
}

/** The entry paths among stored `keys` (values, not fields), in code-unit order. */
export function entryPaths(keys: Iterable<string>): string[] {
  const out: string[] = [];
  for (const key of keys) if (!key.includes(FIELD_SEPARATOR)) out.push(key);
  return out.sort();
}

/**
 * A folder named on the command line: `web/` or `web` (a path's leading
 * segments), given back with one trailing '/'. INVALID_NAME for anything that
 * is not a path once the trailing '/' is dropped.
 */
export function folderPrefix(text: string): string {
  const bare = text.endsWith('/') ? text.slice(0, -1) : text;
  validateEntryPath(bare);
  return `${bare}/`;
}
