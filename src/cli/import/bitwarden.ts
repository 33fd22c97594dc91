/**
 * Bitwarden's unencrypted JSON export (Tools > Export vault > .json; `bw
 * export --format json`): `{"encrypted": false, "folders": [...], "items":
 * [...]}`. Each item has a `name`, `notes`, custom `fields` ({name, value,
 * type: 0 text, 1 hidden, 2 boolean, 3 linked}) and, for a login (type 1),
 * `login: {username, password, totp, uris: [{uri}]}`.
 *
 * Each item becomes one entry (paths.ts): its folder (`Work`, or nested
 * `Work/AWS`: Bitwarden nests folders by '/'; an organisation's item without
 * one, its first collection) and its name give the path (`Work/GitHub`); its
 * password is the value; `username`, `totp` (an otpauth URI, so `stash otp`
 * works), `url` per URI (`url-2`...), `notes` and one field per custom field
 * are its fields. Secure notes (type 2) give their notes (as the value) and
 * fields. Cards, identities and SSH keys give their notes and fields too;
 * their own fields are not imported, and a warning says which items that
 * concerns. Linked fields hold no value and are skipped.
 *
 * With `--flat` (names.ts, rule 3): TITLE_USERNAME, TITLE_PASSWORD,
 * TITLE_TOTP, TITLE_URL (the first URI), TITLE_NOTES, and TITLE_<FIELD> per
 * custom field.
 */
import { ImportError, type Collector, type SourceItem } from './collector.js';
import { kindOf, readJson } from './json.js';
import { fieldName } from './names.js';
import { totpValue } from './totp.js';

const TYPES: Record<number, string> = { 1: 'login', 2: 'secure note', 3: 'card', 4: 'identity', 5: 'SSH key' };

type Obj = Record<string, unknown>;

function isObj(v: unknown): v is Obj {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** The names of the export's folders and collections by id (names only: Bitwarden exports them unencrypted). */
function folderNames(doc: Obj): Map<string, string> {
  const names = new Map<string, string>();
  for (const list of [doc.folders, doc.collections])
    for (const f of Array.isArray(list) ? list : [])
      if (isObj(f) && typeof f.id === 'string' && typeof f.name === 'string') names.set(f.id, f.name);
  return names;
}

/** The path of an item as Bitwarden writes it: its folder's (or first collection's) names, then its own. */
function segmentsOf(item: Obj, title: string, folders: Map<string, string>): string[] {
  const collection = Array.isArray(item.collectionIds) ? item.collectionIds[0] : undefined;
  const id = typeof item.folderId === 'string' ? item.folderId : collection;
  const folder = typeof id === 'string' ? folders.get(id) : undefined;
  return [...(folder ?? '').split('/').filter((s) => s.trim() !== ''), title];
}

/** Parses the export into `sink`; `flat` gives the names of `--flat`. Returns warnings (names only). */
export function parseBitwarden(bytes: Buffer, file: string, sink: Collector, flat = false): string[] {
  const doc = readJson(bytes, file);
  if (!isObj(doc)) throw new ImportError(`${file}: the JSON is ${kindOf(doc)}, not a Bitwarden export`);
  if (doc.encrypted === true || doc.passwordProtected === true) {
    throw new ImportError(
      `${file} is an encrypted Bitwarden export; export again choosing the .json format (not "encrypted")`,
    );
  }
  if (!Array.isArray(doc.items)) throw new ImportError(`${file}: no "items" array; is this a Bitwarden JSON export?`);
  const warnings: string[] = [];
  const notImported: string[] = [];
  const folders = folderNames(doc);
  doc.items.forEach((item: unknown, i: number) => {
    const where = `items[${i}]`;
    if (!isObj(item)) throw new ImportError(`${file}: ${where} is ${kindOf(item)}, not an item`);
    const title = item.name;
    if (typeof title !== 'string' || title.trim() === '') throw new ImportError(`${file}: ${where} has no name`);
    const from = (what: string): string => `item ${JSON.stringify(title)} ${what}`;
    const text = (v: unknown, what: string): string | null => {
      if (v === null || v === undefined) return null;
      if (typeof v !== 'string')
        throw new ImportError(`${file}: ${where} (${JSON.stringify(title)}) ${what} is ${kindOf(v)}, not text`);
      return v;
    };
    const source: SourceItem = { segments: segmentsOf(item, title, folders), source: `item ${JSON.stringify(title)}` };
    // FIELD names the flat entry (TITLE_FIELD); `field` the entry's field (null: its value).
    const add = (field: string, what: string, v: unknown, as: string | null = field): void => {
      const s = text(v, what);
      if (s !== null) sink.add(fieldName(title, field), from(what), s, { item: source, field: as });
    };
    const type = typeof item.type === 'number' ? item.type : 0;
    if (type === 1) {
      const login = isObj(item.login) ? item.login : {};
      add('USERNAME', 'username', login.username, 'username');
      add('PASSWORD', 'password', login.password, null);
      const totp = text(login.totp, 'totp');
      if (totp !== null && totp !== '') {
        const { value, warning } = totpValue(totp, title);
        if (warning) warnings.push(`${file}: item ${JSON.stringify(title)}: ${warning}`);
        sink.add(fieldName(title, 'TOTP'), from('totp'), value, { item: source, field: 'totp' });
      }
      const uris = (Array.isArray(login.uris) ? login.uris : []).filter(
        (u: unknown) => isObj(u) && typeof u.uri === 'string' && u.uri !== '',
      ) as Obj[];
      for (const u of flat ? uris.slice(0, 1) : uris) add('URL', 'uri', u.uri, 'url');
    } else if (type !== 2) {
      notImported.push(`${JSON.stringify(title)} (${TYPES[type] ?? `type ${type}`})`);
    }
    add('NOTES', 'notes', item.notes, 'notes');
    const fields = Array.isArray(item.fields) ? item.fields : [];
    fields.forEach((f: unknown, j: number) => {
      if (!isObj(f)) throw new ImportError(`${file}: ${where}.fields[${j}] is ${kindOf(f)}, not a field`);
      if (f.type === 3) return; // linked: points at another field, holds nothing itself
      const name = typeof f.name === 'string' && f.name.trim() !== '' ? f.name : `FIELD_${j + 1}`;
      add(name, `field ${JSON.stringify(name)}`, typeof f.value === 'boolean' ? String(f.value) : f.value);
    });
  });
  if (notImported.length > 0) {
    warnings.push(`${file}: only the notes and custom fields were imported of ${notImported.join(', ')}`);
  }
  return warnings;
}
