/**
 * 1Password's CSV export. 1Password 8 writes the header
 * `Title,Url,Username,Password,OTPAuth,Favorite,Archived,Tags,Notes`; older
 * versions let you pick the columns (`title,website,username,password,notes`,
 * `Title,Password,Username,URL,Notes,Type`). Columns are found by name, case
 * ignored:
 *
 *   title, name                                 the item (names.ts, rule 3)
 *   username, user name, login                  TITLE_USERNAME
 *   password                                    TITLE_PASSWORD
 *   otpauth, one-time password, otp, totp       TITLE_TOTP (as an otpauth URI)
 *   url, urls, website, login url               TITLE_URL
 *   notes, notesplain, note, comments           TITLE_NOTES
 *   favorite, archived, tags, type, vault,
 *   category, created/modified dates            not imported (not secrets)
 *   anything else                               TITLE_<COLUMN>
 *
 * Empty cells give no entry. A CSV export holds logins and passwords only;
 * 1Password's other item kinds need its .1pux format, which is not read here.
 */
import { ImportError, type Collector } from './collector.js';
import { parseCsv } from './csv.js';
import { fieldName } from './names.js';
import { totpValue } from './totp.js';

type Role = 'title' | 'username' | 'password' | 'otp' | 'url' | 'notes' | 'skip' | 'field';

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
  vault: 'skip',
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

/** Parses the export into `sink`; returns warnings (names only). */
export function parseOnePassword(bytes: Buffer, file: string, sink: Collector): string[] {
  const [head, ...rows] = parseCsv(bytes, file);
  if (head === undefined) throw new ImportError(`${file} is empty`);
  const columns = head.fields.map((f) => f.toString('utf8').trim());
  const roles = columns.map((c): Role => ROLES[c.toLowerCase()] ?? 'field');
  const titleAt = roles.indexOf('title');
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
    row.fields.forEach((cell, i) => {
      const role = roles[i]!;
      if (role === 'title' || role === 'skip') return;
      if (role === 'otp') {
        const seed = cell.toString('utf8').trim();
        cell.fill(0);
        if (seed === '') return;
        const { value, warning } = totpValue(seed, title);
        if (warning) warnings.push(`${file} line ${row.line} (${JSON.stringify(title)}): ${warning}`);
        sink.add(fieldName(title, 'TOTP'), from(columns[i]!), value);
        return;
      }
      sink.add(fieldName(title, FIELD_OF[role] ?? columns[i]!), from(columns[i]!), cell);
    });
  }
  return warnings;
}
