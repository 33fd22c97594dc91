/**
 * One decrypted password-store entry (pass, https://www.passwordstore.org):
 * by pass's convention the first line is the password and the rest is free
 * text. For the entry at `web/github.com.gpg`:
 *
 *   WEB_GITHUB_COM         the first line (without its line ending)
 *   WEB_GITHUB_COM_NOTES   every line after it, as written (trailing line endings dropped)
 *   WEB_GITHUB_COM_TOTP    an `otpauth://totp/` line among them (pass-otp's convention),
 *                          also kept in the notes
 *
 * The path is mapped by names.ts, rule 2 (folders joined by `_`). Pure: the
 * bytes come from pass-store.ts, which runs gpg.
 */
import type { Collector } from './collector.js';
import { fieldName, mapName } from './names.js';
import { totpValue } from './totp.js';

const LF = 0x0a;
const CR = 0x0d;

/** `relPath` is the entry's path in the store without `.gpg` (`web/github.com`). Returns warnings. */
export function parsePassEntry(relPath: string, plain: Buffer, sink: Collector): string[] {
  const name = mapName(relPath);
  const from = (what: string): string => `${relPath}.gpg ${what}`;
  const nl = plain.indexOf(LF);
  const firstEnd = nl < 0 ? plain.length : nl;
  const password = plain.subarray(0, firstEnd > 0 && plain[firstEnd - 1] === CR ? firstEnd - 1 : firstEnd);
  let restEnd = plain.length;
  while (restEnd > firstEnd + 1 && (plain[restEnd - 1] === LF || plain[restEnd - 1] === CR)) restEnd--;
  const rest = nl < 0 ? plain.subarray(0, 0) : plain.subarray(nl + 1, restEnd);
  const warnings: string[] = [];
  // Looked for before the notes are copied (and their bytes zeroed by the collector).
  const totp = findTotpLine(rest);
  sink.add(name, from('password (line 1)'), password);
  sink.add(fieldName(relPath, 'NOTES'), from('notes (lines 2-)'), rest);
  if (totp !== null) {
    const { value, warning } = totpValue(totp, relPath);
    if (warning) warnings.push(`${relPath}.gpg: ${warning}`);
    sink.add(fieldName(relPath, 'TOTP'), from('otpauth line'), value);
  }
  return warnings;
}

/** The first line starting with otpauth://totp/, as text (it becomes the stored seed), or null. */
function findTotpLine(rest: Buffer): string | null {
  const prefix = Buffer.from('otpauth://totp/');
  let at = 0;
  while (at < rest.length) {
    let end = rest.indexOf(LF, at);
    if (end < 0) end = rest.length;
    let s = at;
    while (s < end && (rest[s] === 0x20 || rest[s] === 0x09)) s++;
    if (end - s >= prefix.length && rest.subarray(s, s + prefix.length).equals(prefix)) {
      return rest.toString('utf8', s, end > s && rest[end - 1] === CR ? end - 1 : end).trim();
    }
    at = end + 1;
  }
  return null;
}
