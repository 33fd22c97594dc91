/**
 * Which value of each stored key a merge of two versions keeps: the rule
 * alone, over entry maps, with no file, key or signature in sight.
 *
 * A stored key is an entry path or one field of it (PATH#FIELD), and each is
 * judged on its own: a change to a field on one side and to the value on the
 * other is no conflict.
 *
 * Without the common version (two-way), an entry both sides hold with
 * different values is a conflict, and an entry only one side holds is kept:
 * an addition cannot be told from a deletion. With it (three-way), a key
 * that only one side changed (changed, added or removed) takes that side's
 * change, a key both changed the same way is taken as it is, and only a key
 * both changed differently is a conflict, described by what each side did.
 */
import { constantTimeEqual } from '../secure.js';
import { FIELD_SEPARATOR, splitKey } from '../entry-path.js';

/** What one side did to a key since the common version. */
export type EntryChange = 'changed' | 'removed' | 'added';

/** A key both sides changed, differently. */
export interface EntryConflict {
  key: string;
  ours: EntryChange;
  theirs: EntryChange;
  /**
   * A field one side added or changed while the other removed its entry (and
   * so all its fields): the side that removed the entry.
   */
  entryRemovedBy?: 'ours' | 'theirs';
}

/** Which side wins a conflict, or null to refuse one. */
export type Winner = 'ours' | 'theirs' | null;

type EntryMap = ReadonlyMap<string, Uint8Array>;

export interface RuleResult {
  merged: Map<string, Uint8Array>;
  /** Keys whose value was taken from theirs (new there, changed there, or its side won). */
  fromOther: string[];
  /** Keys ours holds that the result does not: removed by theirs (three-way only). */
  removed: string[];
  /** Keys both sides changed differently, sorted by key; decided by `winner`, or refused. */
  conflicts: EntryConflict[];
  /** Two-way only: keys one side holds and the other does not, all kept. */
  oneSided: string[];
}

function same(a: Uint8Array | undefined, b: Uint8Array | undefined): boolean {
  if (a === undefined || b === undefined) return a === b;
  return constantTimeEqual(a, b);
}

/** What `side` did to `key` since `base`; null when it holds what the base held. */
function changeOf(base: EntryMap, side: EntryMap, key: string): EntryChange | null {
  const was = base.get(key);
  const now = side.get(key);
  if (was === undefined) return now === undefined ? null : 'added';
  if (now === undefined) return 'removed';
  return constantTimeEqual(was, now) ? null : 'changed';
}

/** The union of both sides; a key both hold with different values is a conflict ('changed' on both). */
export function twoWay(ours: EntryMap, theirs: EntryMap, winner: Winner): RuleResult {
  const merged = new Map<string, Uint8Array>(ours);
  const fromOther: string[] = [];
  const conflicts: EntryConflict[] = [];
  const oneSided = [...ours.keys()].filter((key) => !theirs.has(key));
  for (const [key, value] of theirs) {
    const mine = ours.get(key);
    if (mine === undefined) {
      merged.set(key, value);
      fromOther.push(key);
      oneSided.push(key);
    } else if (!constantTimeEqual(mine, value)) {
      conflicts.push({ key, ours: 'changed', theirs: 'changed' });
      if (winner === 'theirs') {
        merged.set(key, value);
        fromOther.push(key);
      }
    }
  }
  return { merged, fromOther, removed: [], conflicts, oneSided: oneSided.sort() };
}

/**
 * The three-way rule against `base`, the version both sides grew from. A
 * conflict keeps ours unless `winner` is 'theirs' (the caller refuses
 * conflicts when `winner` is null). A field left without its entry's value
 * (added on one side to an entry the other removed) is a conflict too; its
 * winner keeps the whole entry as that side has it, or none of it.
 */
export function threeWay(base: EntryMap, ours: EntryMap, theirs: EntryMap, winner: Winner): RuleResult {
  const merged = new Map<string, Uint8Array>();
  const fromOther: string[] = [];
  const removed: string[] = [];
  const conflicts: EntryConflict[] = [];
  const take = (key: string, side: 'ours' | 'theirs'): void => {
    const value = (side === 'ours' ? ours : theirs).get(key);
    if (value !== undefined) merged.set(key, value);
    if (side === 'ours') return;
    if (value !== undefined) fromOther.push(key);
    else if (ours.has(key)) removed.push(key);
  };
  const keys = new Set([...base.keys(), ...ours.keys(), ...theirs.keys()]);
  for (const key of [...keys].sort()) {
    const o = ours.get(key);
    if (same(o, theirs.get(key))) {
      if (o !== undefined) merged.set(key, o);
      continue;
    }
    const co = changeOf(base, ours, key);
    const ct = changeOf(base, theirs, key);
    if (ct === null) take(key, 'ours');
    else if (co === null) take(key, 'theirs');
    else {
      conflicts.push({ key, ours: co, theirs: ct });
      take(key, winner === 'theirs' ? 'theirs' : 'ours');
    }
  }
  orphanedFields(merged, base, ours, theirs, winner, conflicts, take);
  conflicts.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  // Bringing an entry back, or dropping a field, changes what was taken and removed.
  return {
    merged,
    fromOther: fromOther.filter((k) => merged.has(k)),
    removed: removed.filter((k) => !merged.has(k)),
    conflicts,
    oneSided: [],
  };
}

/**
 * Fields in `merged` whose entry has no value there: one side removed the
 * entry, the other added or changed the field. Each is a conflict (recorded
 * once); a winner that holds the entry brings it back with all its fields as
 * that side has them, else the field goes (the caller keeps the loser's value).
 */
function orphanedFields(
  merged: Map<string, Uint8Array>,
  base: EntryMap,
  ours: EntryMap,
  theirs: EntryMap,
  winner: Winner,
  conflicts: EntryConflict[],
  take: (key: string, side: 'ours' | 'theirs') => void,
): void {
  for (const key of [...merged.keys()]) {
    const { path, field } = splitKey(key);
    if (field === null || merged.has(path)) continue;
    if (ours.has(path) === theirs.has(path)) continue; // not made by this merge (both sides lack the entry)
    const keeper = ours.has(path) ? 'ours' : 'theirs';
    const remover = keeper === 'ours' ? 'theirs' : 'ours';
    if (!conflicts.some((c) => c.key === key)) {
      const change = changeOf(base, keeper === 'ours' ? ours : theirs, key) ?? 'changed';
      conflicts.push({
        key,
        ours: keeper === 'ours' ? change : 'removed',
        theirs: keeper === 'theirs' ? change : 'removed',
        entryRemovedBy: remover,
      });
    }
    if (winner !== keeper) {
      merged.delete(key);
      continue;
    }
    const prefix = `${path}${FIELD_SEPARATOR}`;
    for (const k of (keeper === 'ours' ? ours : theirs).keys())
      if ((k === path || k.startsWith(prefix)) && !merged.has(k)) take(k, keeper);
  }
}

/**
 * One line naming each conflict and what each side did, e.g.
 * `API_KEY (changed in ours, removed in theirs)`; `labels` name the sides.
 */
export function describeConflicts(conflicts: EntryConflict[], labels: { ours: string; theirs: string }): string {
  return conflicts
    .map((c) => {
      if (c.entryRemovedBy) {
        const keeper = c.entryRemovedBy === 'ours' ? 'theirs' : 'ours';
        const entry = splitKey(c.key).path;
        return `${c.key} (${c[keeper]} in ${labels[keeper]}; its entry ${entry} removed in ${labels[c.entryRemovedBy]})`;
      }
      return `${c.key} (${c.ours} in ${labels.ours}, ${c.theirs} in ${labels.theirs})`;
    })
    .join(', ');
}
