/**
 * The structure rule of `stash import` (docs/cli.md, "Paths and fields"): the
 * values of one source item (a pass file, a Bitwarden or 1Password item)
 * become one entry, at a path built from its folders and title, holding its
 * password as the value and the rest as fields.
 *
 * 1. Path: each folder and the title is one segment, kept as written when
 *    it is one (letters, digits, '.', '-', '_', '@'); otherwise accents are
 *    dropped (é -> e), every run of other characters becomes one '-' (a run
 *    at either end is dropped), nothing left (or '.', '..') becomes `item`,
 *    and it is cut to 128 characters: `Bank Account/2nd card` ->
 *    `Bank-Account/2nd-card`. Case is kept.
 * 2. Field: the source's name lower-cased; `user`, `login`, `username`,
 *    `user name` give `username`; `url`, `uri`, `website` give `url`; `otp`,
 *    `totp`, `otpauth` give `totp`; `note`, `notes`, `comments` give `notes`;
 *    any other name has every run of characters outside a-z, 0-9, '_', '-'
 *    turned into one '-' (at either end dropped), `field-` before it unless
 *    it starts with a letter, and is cut to 32: `Security Question` ->
 *    `security-question`, `2FA` -> `field-2fa`.
 * 3. Value: the item's password; an item without one takes its notes as its
 *    value (a secure note), and one with neither an empty value, so that
 *    its fields have an entry to belong to.
 * 4. A path an earlier item of the same import took gets `-2`, `-3`, ... on
 *    its last segment; so does a field name already taken in its entry (a
 *    second URL: `url-2`).
 *
 * Every path that differs from its source is listed in the output, and so is
 * every field whose name differs from the source's.
 */
import { MAX_PATH_BYTES, MAX_SEGMENT_BYTES } from '../../vault/entry-path.js';
import { type Collected, ImportError, type SourceItem } from './collector.js';

/** One field of an imported entry. */
export interface ImportField {
  name: string;
  from: string;
  /** The source's name of the field when it differs from `name`; else null. */
  mappedFrom: string | null;
  value: Buffer;
}

/** One entry as the writer commits it: a path, its value and its fields. */
export interface ImportEntry {
  path: string;
  /** Where it came from: `web/github.com.gpg`, `item "GitHub"`, `line 4`. */
  from: string;
  /** The source's own name (path) when `path` differs from it; else null. */
  mappedFrom: string | null;
  value: Buffer;
  fields: ImportField[];
}

const SEGMENT_CHARS = /^[A-Za-z0-9._@-]+$/;
const MAX_FIELD = 32;

/** Rule 1: one folder or title to a path segment. */
export function segmentOf(text: string): string {
  if (SEGMENT_CHARS.test(text) && text !== '.' && text !== '..') return text.slice(0, MAX_SEGMENT_BYTES);
  const plain = text.normalize('NFKD').replace(/\p{M}/gu, '');
  const s = runsTo(plain, /[^A-Za-z0-9._@-]+/g, '-');
  return s === '' || s === '.' || s === '..' ? 'item' : s.slice(0, MAX_SEGMENT_BYTES);
}

/** Every run matched by `re` becomes `joint`, except a run at either end, which is dropped. */
function runsTo(text: string, re: RegExp, joint: string): string {
  return text.replace(re, (run: string, at: number) => (at === 0 || at + run.length === text.length ? '' : joint));
}

const FIELD_ALIASES: Record<string, string> = {
  user: 'username',
  login: 'username',
  username: 'username',
  'user name': 'username',
  url: 'url',
  uri: 'url',
  website: 'url',
  otp: 'totp',
  totp: 'totp',
  otpauth: 'totp',
  note: 'notes',
  notes: 'notes',
  comments: 'notes',
};

/** Rule 2: a source's field name to a field name. */
export function fieldNameOf(text: string): string {
  const lower = text.normalize('NFKD').replace(/\p{M}/gu, '').trim().toLowerCase();
  const alias = FIELD_ALIASES[lower];
  if (alias !== undefined) return alias;
  const s = runsTo(lower, /[^a-z0-9_-]+/g, '-');
  if (s === '') return 'field';
  return (/^[a-z]/.test(s) ? s : `field-${s}`).slice(0, MAX_FIELD);
}

/**
 * Rule 4: `prefix + last`, or with `-N` after `last` for the first N from 2
 * that `taken` lacks (`last` cut so that it stays within `maxLast` and the
 * whole within `maxAll`); added to `taken`.
 */
function unique(prefix: string, last: string, taken: Set<string>, maxLast: number, maxAll: number): string {
  let name = prefix + last;
  for (let n = 2; taken.has(name); n++) {
    const suffix = `-${n}`;
    const room = Math.min(maxLast, maxAll - prefix.length) - suffix.length;
    name = `${prefix}${last.slice(0, room)}${suffix}`;
  }
  taken.add(name);
  return name;
}

/** Rules 1 and 4: the path of `item`, unique among `taken`. */
function pathOf(item: SourceItem, taken: Set<string>): string {
  const segments = item.segments.length > 0 ? item.segments.map(segmentOf) : ['item'];
  const last = segments.pop()!;
  const prefix = segments.map((s) => `${s}/`).join('');
  // A clash takes room from the last segment; the folders must leave it some.
  if (prefix.length + Math.min(last.length, 8) > MAX_PATH_BYTES)
    throw new ImportError(
      `${item.source}: its folders are ${prefix.length} characters long once mapped, and an entry path has at most ${MAX_PATH_BYTES}: shorten them`,
    );
  return unique(prefix, last.slice(0, MAX_PATH_BYTES - prefix.length), taken, MAX_SEGMENT_BYTES, MAX_PATH_BYTES);
}

/** Rules 1-4 over everything collected: one entry per source item, in the order of the source. */
export function assignPaths(items: readonly Collected[]): ImportEntry[] {
  const groups = new Map<SourceItem, Collected[]>();
  for (const c of items) {
    const item = c.place?.item ?? { segments: [c.name], source: c.from };
    const group = groups.get(item);
    if (group) group.push(c);
    else groups.set(item, [c]);
  }
  const paths = new Set<string>();
  return [...groups].map(([item, values]) => {
    const path = pathOf(item, paths);
    const written = item.segments.join('/');
    const names = new Set<string>();
    let value: Buffer | null = null;
    const fields: ImportField[] = [];
    for (const c of values) {
      const field = c.place?.field ?? null;
      if (field === null && value === null) {
        value = c.value;
        continue;
      }
      const source = field ?? 'password';
      const name = unique('', fieldNameOf(source), names, MAX_FIELD, MAX_FIELD);
      fields.push({ name, from: c.from, mappedFrom: name === source ? null : source, value: c.value });
    }
    if (value === null) {
      const notes = fields.findIndex((f) => f.name === 'notes');
      value = notes >= 0 ? fields.splice(notes, 1)[0]!.value : Buffer.alloc(0);
    }
    return { path, from: item.source, mappedFrom: path === written ? null : written, value, fields };
  });
}
