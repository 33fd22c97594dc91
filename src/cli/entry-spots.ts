/**
 * What `stash mv` and `stash cp` move: their arguments read as a source and
 * a target (an entry or a folder, in a container), and the stored keys of the
 * source paired with the keys they get at the target. An entry goes with its
 * fields (stored beside it as PATH#FIELD); a folder with every entry under it.
 *
 * Two arguments are CONTAINER/PATH each: the first '/' ends the container, so
 * `work/web/github.com` is the entry web/github.com of work (a container name
 * holds no '/'). Three are CONTAINER FROM TO, both in that container.
 * A path ending in '/' is a folder. Pure: the command reads and writes.
 */
import { StashError, UsageError } from '../errors.js';
import { entryNotFound } from '../vault/containers.js';
import { entryPaths, fieldKey, folderPrefix, splitKey, validateEntryPath } from '../vault/entry-path.js';
import { type ContainerName, parseContainerName } from '../vault/names.js';

/** An entry (`web/github.com`) or a folder (`web/`, with its '/') of a container. */
export interface Spot {
  container: ContainerName;
  path: string;
  folder: boolean;
}

/** A target: a spot, or (`CONTAINER2/`) the source's own path in another container. */
export interface Target {
  container: ContainerName;
  /** Null keeps the source's path. */
  path: string | null;
  folder: boolean;
}

/** A path or folder given on the command line, checked. */
function pathOf(text: string, what: string): { path: string; folder: boolean } {
  if (text.endsWith('/')) return { path: folderPrefix(text), folder: true };
  if (text === '') throw new UsageError(`the ${what} is empty: give an entry path or a folder (web/)`);
  validateEntryPath(text);
  return { path: text, folder: false };
}

/** CONTAINER/PATH split at its first '/'. */
function splitSpot(text: string, what: 'source' | 'target'): [container: ContainerName, rest: string] {
  const slash = text.indexOf('/');
  if (slash <= 0) {
    throw new UsageError(
      `the ${what} ${JSON.stringify(text)} is not CONTAINER/PATH${what === 'target' ? ' (or CONTAINER/ to keep the path)' : ' (or give three arguments: CONTAINER FROM TO)'}`,
    );
  }
  return [parseContainerName(text.slice(0, slash)), text.slice(slash + 1)];
}

/** The source and target of `mv`/`cp` from its 2 or 3 positionals. */
export function parseMoveArgs(positionals: readonly string[]): { from: Spot; to: Target } {
  if (positionals.length === 3) {
    const [containerText, fromText, toText] = positionals as [string, string, string];
    const container = parseContainerName(containerText);
    return {
      from: { container, ...pathOf(fromText, 'source') },
      to: { container, ...pathOf(toText, 'target') },
    };
  }
  const [sourceContainer, sourceRest] = splitSpot(positionals[0]!, 'source');
  const [targetContainer, targetRest] = splitSpot(positionals[1]!, 'target');
  const from = { container: sourceContainer, ...pathOf(sourceRest, 'source') };
  if (targetRest === '') return { from, to: { container: targetContainer, path: null, folder: from.folder } };
  return { from, to: { container: targetContainer, ...pathOf(targetRest, 'target') } };
}

/** Where source path `path` goes: a folder's entries keep what follows the folder, an entry into a folder its last segment. */
function targetPath(path: string, from: Spot, to: Target): string {
  if (to.path === null) return path;
  if (from.folder) {
    const folder = to.folder ? to.path : `${to.path}/`;
    return folder + path.slice(from.path.length);
  }
  return to.folder ? to.path + path.slice(path.lastIndexOf('/') + 1) : to.path;
}

/** How a spot is written in messages: work/web/github.com, work/web/. */
export function spotText(container: string, path: string): string {
  return `${container}/${path}`;
}

/**
 * The stored keys of `from` among `keys` (the source container's), each with
 * its key at `to`, in code-unit order. ENTRY_NOT_FOUND when the source has no
 * entry; a usage error when source and target are the same or overlap (a
 * folder moved into itself).
 */
export function planMoves(keys: readonly string[], from: Spot, to: Target): Array<[from: string, to: string]> {
  const selected = from.folder
    ? keys.filter((k) => k.startsWith(from.path))
    : keys.filter((k) => splitKey(k).path === from.path);
  if (!selected.includes(from.path) && !from.folder) throw entryNotFound(from.container, from.path, keys);
  if (from.folder && entryPaths(selected).length === 0)
    throw new StashError(
      'ENTRY_NOT_FOUND',
      `container ${JSON.stringify(from.container)} has no entry under ${from.path} (see stash ls ${from.container})`,
    );
  const pairs = selected.sort().map((key): [string, string] => {
    const { path, field } = splitKey(key);
    const moved = targetPath(path, from, to);
    validateEntryPath(moved);
    return [key, field === null ? moved : fieldKey(moved, field)];
  });
  if (from.container === to.container) {
    const sources = new Set(selected);
    const shown = spotText(from.container, from.path);
    if (pairs.every(([a, b]) => a === b)) throw new UsageError(`${shown} is the source and the target`);
    // web/ to web/old/ is fine until web/old/x exists: web/x would then land on an entry that itself moves.
    const clash = pairs.find(([, b]) => sources.has(b));
    if (clash)
      throw new UsageError(
        `${shown} and ${spotText(to.container, to.path ?? from.path)} overlap: ${spotText(to.container, clash[1])} would be written while it is moved itself (move through another name)`,
      );
  }
  return pairs;
}
