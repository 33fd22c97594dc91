/**
 * What a write does to the entries of a container and to their history, the
 * same for private and shared containers: a value replaced or removed
 * becomes the newest previous value of its entry, each entry keeps at most
 * `keep` of them, and `purge` drops an entry's history with it. The values
 * stay views into the decoded body (secure memory) until encodeBody copies
 * them into the new one.
 */
import { changeTime, historyOf, withChangeTimes, withHistory, type Entries } from './container-body.js';
import { DEFAULT_HISTORY_KEEP, MAX_HISTORY_KEEP, type History, type PastValue } from './history-block.js';
import { VaultError } from './errors.js';
import { FIELD_SEPARATOR, splitKey, validateStoredKey } from './entry-path.js';
import { constantTimeEqual } from './secure.js';

export { DEFAULT_HISTORY_KEEP } from './history-block.js';

export interface HistoryPolicy {
  /** Previous values kept per entry, 0..MAX_HISTORY_KEEP; 0 keeps none (and drops what was kept). */
  keep: number;
  /** Entries whose history goes too (`rm --purge`); an entry left with neither value nor history is gone. */
  purge?: readonly string[];
  /**
   * Renames within the container (`mv C/A C/B`, given as changes A: null and
   * B: A's value): A's history goes to B with the value, and no copy of the
   * value stays behind under A.
   */
  moves?: ReadonlyArray<readonly [from: string, to: string]>;
}

export const DEFAULT_POLICY: HistoryPolicy = { keep: DEFAULT_HISTORY_KEEP };

/** INVALID_ARGUMENT unless `keep` is a whole number from 0 to MAX_HISTORY_KEEP. */
export function checkKeep(keep: number): void {
  if (!Number.isInteger(keep) || keep < 0 || keep > MAX_HISTORY_KEEP) {
    throw new VaultError(
      'INVALID_ARGUMENT',
      `the history length must be a whole number from 0 to ${MAX_HISTORY_KEEP}, got ${keep}`,
    );
  }
}

/** INVALID_ARGUMENT / INVALID_NAME unless `policy` is usable. */
export function checkPolicy(policy: HistoryPolicy): void {
  checkKeep(policy.keep);
  for (const name of [...(policy.purge ?? []), ...(policy.moves ?? []).flat()]) validateStoredKey(name);
}

/**
 * `changes` with the fields of every entry it removes removed too (an entry
 * goes with its fields), and `purge` with their histories. INVALID_ARGUMENT
 * for a field set on an entry that has no value after the change.
 */
function withFields(
  entries: Entries,
  changes: ReadonlyMap<string, Buffer | null>,
  purge: readonly string[],
): { changes: ReadonlyMap<string, Buffer | null>; purge: readonly string[] } {
  const removed = [...changes].filter(([k, v]) => v === null && splitKey(k).field === null).map(([k]) => k);
  const purged = purge.filter((k) => splitKey(k).field === null);
  const out = new Map(changes);
  const outPurge = new Set(purge);
  if (removed.length > 0 || purged.length > 0) {
    const prefixes = (paths: string[]) => paths.map((p) => `${p}${FIELD_SEPARATOR}`);
    const under = (key: string, ps: string[]) => ps.some((p) => key.startsWith(p));
    const removedPrefixes = prefixes(removed);
    const purgedPrefixes = prefixes(purged);
    for (const key of entries.keys()) if (!out.has(key) && under(key, removedPrefixes)) out.set(key, null);
    for (const key of historyOf(entries).keys()) if (under(key, purgedPrefixes)) outPurge.add(key);
  }
  for (const [key, value] of out) {
    const { path, field } = splitKey(key);
    if (field === null || value === null) continue;
    const valueAfter = out.has(path) ? out.get(path) : entries.get(path);
    if (valueAfter == null)
      throw new VaultError('INVALID_ARGUMENT', `entry ${path} has no value to hold field ${field}: set ${path} first`);
  }
  return { changes: out, purge: [...outPurge] };
}

/** Every list cut to `keep` versions; names left with none are dropped. */
function capped(history: Map<string, PastValue[]>, keep: number): Map<string, PastValue[]> {
  const out = new Map<string, PastValue[]>();
  for (const [name, versions] of history) if (keep > 0 && versions.length > 0) out.set(name, versions.slice(0, keep));
  return out;
}

/**
 * Applies `changes` (a Buffer sets, null removes) to `entries` (a decoded
 * body): the new map, marked with change times and history, and the names
 * that changed (a purged history counts). Setting an entry to the value it
 * has changes nothing.
 */
export function applyChanges(
  entries: Entries,
  changes: ReadonlyMap<string, Buffer | null>,
  policy: HistoryPolicy = DEFAULT_POLICY,
  now = Date.now(),
): { next: Map<string, Uint8Array>; changed: string[] } {
  checkPolicy(policy);
  const expanded = withFields(entries, changes, policy.purge ?? []);
  changes = expanded.changes;
  policy = { ...policy, purge: expanded.purge };
  const next = new Map<string, Uint8Array>(entries);
  const changed: string[] = [];
  for (const [entryName, value] of changes) {
    const old = next.get(entryName);
    if (value === null) {
      if (next.delete(entryName)) changed.push(entryName);
    } else if (old === undefined || !constantTimeEqual(old, value)) {
      next.set(entryName, value);
      changed.push(entryName);
    }
  }
  const history = new Map<string, PastValue[]>([...historyOf(entries)].map(([n, v]) => [n, [...v]]));
  // A move read its value under an earlier lock: if the source has changed since (a set, another
  // member's write), the write is no move but a removal of that newer value, which goes to history.
  const moves = (policy.moves ?? []).filter(([from, to]) => {
    const source = entries.get(from);
    const moved = changes.get(to);
    return source !== undefined && moved != null && constantTimeEqual(source, moved);
  });
  const movedFrom = new Set(moves.map(([from]) => from));
  for (const entryName of changed) {
    const old = entries.get(entryName);
    if (old !== undefined && !movedFrom.has(entryName)) {
      history.set(entryName, [
        { value: old, changedAt: changeTime(entries, entryName), replacedAt: now },
        ...(history.get(entryName) ?? []),
      ]);
    }
  }
  for (const [from, to] of moves) {
    const carried = history.get(from) ?? [];
    history.delete(from);
    if (carried.length > 0)
      history.set(
        to,
        [...(history.get(to) ?? []), ...carried].sort((a, b) => b.replacedAt - a.replacedAt),
      );
  }
  for (const entryName of policy.purge ?? []) {
    if (history.delete(entryName) && !changed.includes(entryName)) changed.push(entryName);
  }
  withChangeTimes(next, entries, changed, now);
  withHistory(next, capped(history, policy.keep));
  return { next, changed };
}

/**
 * The history of a merge: for every entry the versions of both sides (a
 * value with the same change time once), plus `losers` (the value of a side
 * whose entry lost a conflict, so choosing a side loses nothing), newest
 * first by when they were replaced, at most `keep`.
 */
export function mergeHistories(sides: History[], losers: Map<string, PastValue>, keep: number): History {
  checkKeep(keep);
  const all = new Map<string, PastValue[]>();
  const add = (name: string, v: PastValue) => {
    const list = all.get(name) ?? [];
    // One value set at one time is one version, however each side saw it end.
    const same = list.some((x) => x.changedAt === v.changedAt && constantTimeEqual(x.value, v.value));
    if (!same) list.push(v);
    all.set(name, list);
  };
  for (const side of sides) for (const [name, versions] of side) for (const v of versions) add(name, v);
  for (const [name, v] of losers) add(name, v);
  for (const list of all.values()) list.sort((a, b) => b.replacedAt - a.replacedAt);
  return capped(all, keep);
}
