/**
 * 1Password's CSV export. 1Password 8 writes the header
 * `Title,Url,Username,Password,OTPAuth,Favorite,Archived,Tags,Notes`; older
 * versions let you pick the columns (`title,website,username,password,notes`,
 * `Title,Password,Username,URL,Notes,Type`). Columns are found by name, case
 * ignored:
 *
 *   column                                  entry (paths.ts)    --flat (names.ts, rule 3)
 *   title, name                             the path            TITLE
 *   vault                                   its folder          not imported
 *   username, user name, login              field username      TITLE_USERNAME
 *   password                                the value           TITLE_PASSWORD
 *   otpauth, one-time password, otp, totp   field totp          TITLE_TOTP (as an otpauth URI)
 *   url, urls, website, login url           field url           TITLE_URL
 *   notes, notesplain, note, comments       field notes         TITLE_NOTES
 *   favorite, archived, tags, type,
 *   category, created/modified dates        not imported (not secrets)
 *   anything else                           a field (COLUMN)    TITLE_<COLUMN>
 *
 * Empty cells give no value. A CSV export holds logins and passwords only;
 * 1Password's other item kinds need its .1pux format, which is not read here.
 */
import { ImportError, type Collector, type SourceItem } from './collector.js';
import { parseCsv } from './csv.js';
import { fieldName } from './names.js';
import { totpValue } from './totp.js';

type Role = 'title' | 'vault' | 'username' | 'password' | 'otp' | 'url' | 'notes' | 'skip' | 'field';

const ROLES: Record<string, Role> = {
  title: 'title',
  name: 'title',
  username: 'username',
  'user name': 'username',
  login: 'username',
  password: 'password',
  otpauth: 'otp',
  'one-time password': 'otp',
  otp: 'otp',
  totp: 'otp',
  url: 'url',
  urls: 'url',
  website: 'url',
  'login url': 'url',
  notes: 'notes',
  notesplain: 'notes',
  note: 'notes',
  comments: 'notes',
  favorite: 'skip',
  archived: 'skip',
  tags: 'skip',
  type: 'skip',
  vault: 'vault',
  category: 'skip',
  'created date': 'skip',
  'modified date': 'skip',
  created: 'skip',
  modified: 'skip',
  'last modified': 'skip',
};

const FIELD_OF: Partial<Record<Role, string>> = {
  username: 'USERNAME',
  password: 'PASSWORD',
  url: 'URL',
  notes: 'NOTES',
};

/** The entry field of a role (null: the entry's value); a column of role 'field' keeps its own name. */
const ENTRY_FIELD_OF: Partial<Record<Role, string | null>> = {
  username: 'username',
  password: null,
  url: 'url',
  notes: 'notes',
  otp: 'totp',
};

/** Parses the export into `sink`; returns warnings (names only). */
export function parseOnePassword(bytes: Buffer, file: string, sink: Collector): string[] {
  const [head, ...rows] = parseCsv(bytes, file);
  if (head === undefined) throw new ImportError(`${file} is empty`);
  const columns = head.fields.map((f) => f.toString('utf8').trim());
  const roles = columns.map((c): Role => ROLES[c.toLowerCase()] ?? 'field');
  const titleAt = roles.indexOf('title');
  const vaultAt = roles.indexOf('vault');
  if (titleAt < 0)
    throw new ImportError(
      `${file} line 1: no Title column; is this a 1Password CSV export (Title,Url,Username,Password,OTPAuth,...)?`,
    );
  const warnings: string[] = [];
  for (const row of rows) {
    if (row.fields.length !== columns.length) {
      throw new ImportError(
        `${file} line ${row.line}: ${row.fields.length} fields, but the header has ${columns.length} (nothing was imported)`,
      );
    }
    const title = row.fields[titleAt]!.toString('utf8').trim() || `line ${row.line}`;
    const from = (column: string): string => `line ${row.line} ${JSON.stringify(title)} ${column}`;
    const vault = vaultAt < 0 ? '' : row.fields[vaultAt]!.toString('utf8').trim();
    const item: SourceItem = {
      segments: vault ? [vault, title] : [title],
      source: `line ${row.line} ${JSON.stringify(title)}`,
    };
    const place = (role: Role, column: string) => ({
      item,
      field: role === 'field' ? column : (ENTRY_FIELD_OF[role] ?? null),
    });
    row.fields.forEach((cell, i) => {
      const role = roles[i]!;
      if (role === 'title' || role === 'skip' || role === 'vault') return;
      if (role === 'otp') {
        const seed = cell.toString('utf8').trim();
        cell.fill(0);
        if (seed === '') return;
        const { value, warning } = totpValue(seed, title);
        if (warning) warnings.push(`${file} line ${row.line} (${JSON.stringify(title)}): ${warning}`);
        sink.add(fieldName(title, 'TOTP'), from(columns[i]!), value, place(role, columns[i]!));
        return;
      }
      sink.add(fieldName(title, FIELD_OF[role] ?? columns[i]!), from(columns[i]!), cell, place(role, columns[i]!));
    });
  }
  return warnings;
}
