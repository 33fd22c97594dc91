/**
 * The flat naming rule of `stash import` (docs/cli.md, "Flat names"): the
 * names of dotenv and JSON imports, and of every import with `--flat` (the
 * names stash gave before entry paths; paths.ts has the structure rule):
 *
 * 1. A name that is already a valid entry name (`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)
 *    is kept as it is (dotenv keys, JSON fields).
 * 2. Any other name is mapped: letters upper-cased (accents dropped: é -> E),
 *    every run of other characters becomes one `_`, `_` at either end from
 *    such a run is dropped, a leading digit gets a `_` before it, an empty
 *    result becomes `ITEM`, and it is cut to 128 characters.
 * 3. A login item (Bitwarden, 1Password, pass) becomes `TITLE_FIELD`: the
 *    item's title mapped by rule 2 even when it is valid (so `GitHub` gives
 *    `GITHUB_PASSWORD`), and FIELD one of USERNAME, PASSWORD, TOTP, URL,
 *    NOTES or a custom field's name mapped by rule 2 (without the `_` for a
 *    leading digit, which is not leading there; at most 64 characters).
 * 4. A name already taken by an earlier value of the same import gets `_2`,
 *    `_3`, ... in the order of the file.
 *
 * Every name that differs from its source is listed in the output.
 */
import { FLAT_NAME_RE } from '../../vault/names.js';
import type { Collected } from './collector.js';
import type { ImportEntry } from './paths.js';

const MAX_NAME = 128;

/** Rule 2: any text to an entry name. */
export function mapName(text: string): string {
  const n = mapPart(text);
  return (/^[0-9]/.test(n) ? `_${n}` : n).slice(0, MAX_NAME);
}

/** Rule 2 without the `_` for a leading digit (for the FIELD of TITLE_FIELD, where it is not leading). */
function mapPart(text: string): string {
  const upper = text.normalize('NFKD').replace(/\p{M}/gu, '').toUpperCase();
  // A run at either end is dropped rather than turned into `_` (` my key ` -> MY_KEY).
  const n = upper.replace(/[^A-Z0-9_]+/g, (run: string, at: number) =>
    at === 0 || at + run.length === upper.length ? '' : '_',
  );
  return n === '' ? 'ITEM' : n;
}

/** Rule 3: the entry name of one field of an item titled `title`. */
export function fieldName(title: string, field: string): string {
  const base = mapName(title);
  const suffix = mapPart(field).slice(0, 64);
  return `${base.slice(0, MAX_NAME - suffix.length - 1)}_${suffix}`;
}

export interface Named extends Collected {
  /** The entry name it will have. */
  entry: string;
}

/** Rules 1, 2 and 4 over everything collected, in order. */
export function assignNames(items: readonly Collected[]): Named[] {
  const taken = new Set<string>();
  return items.map((item) => {
    const base = FLAT_NAME_RE.test(item.name) ? item.name : mapName(item.name);
    let entry = base;
    for (let n = 2; taken.has(entry); n++) entry = `${base.slice(0, MAX_NAME - String(n).length - 1)}_${n}`;
    taken.add(entry);
    return { ...item, entry };
  });
}

/** The entries of a flat import: one per value, named by rules 1-4, without fields. */
export function flatEntries(items: readonly Collected[]): ImportEntry[] {
  return assignNames(items).map((n) => ({
    path: n.entry,
    from: n.from,
    mappedFrom: n.entry === n.name ? null : n.name,
    value: n.value,
    fields: [],
  }));
}
