/**
 * One decrypted password-store entry (pass, https://www.passwordstore.org).
 * By pass's convention the first line is the password and the rest free
 * text, in which `key: value` lines (browserpass, passff and gopass read
 * them) and an `otpauth://totp/` line (pass-otp) are common. The entry at
 * `web/github.com.gpg` holding `hunter2`, `user: alice`, an otpauth line
 * and `recovery codes ...` becomes:
 *
 *   web/github.com           the first line (without its line ending)
 *   web/github.com#username  from `user:` (paths.ts, rule 2, maps the key)
 *   web/github.com#totp      the otpauth line, as `stash set --totp` stores it
 *   web/github.com#notes     every other line, as written (blank lines at
 *                            either end dropped)
 *
 * A `key: value` line is a line that starts (no indent) with a key of 1-64
 * letters, digits, spaces, '_', '.' or '-' (starting with a letter or
 * digit), then ':', a space or tab, and a value that is not blank; anything
 * else is kept in the notes. With `--flat` (the names of stash before
 * paths): `WEB_GITHUB_COM` the first line, `WEB_GITHUB_COM_NOTES` all the
 * others as written, and `WEB_GITHUB_COM_TOTP` the otpauth line too.
 *
 * Pure: the bytes come from pass-store.ts, which runs gpg. Values stay bytes
 * (TOTP seeds excepted: they are normalised as text).
 */
import type { Collector, SourceItem } from './collector.js';
import { fieldName, mapName } from './names.js';
import { fieldNameOf } from './paths.js';
import { totpValue } from './totp.js';

const LF = 0x0a;
const CR = 0x0d;
const SPACE = 0x20;
const TAB = 0x09;

/**
 * `relPath` is the entry's path in the store without `.gpg` (`web/github.com`);
 * `flat` gives the names of `--flat`. Returns warnings.
 */
export function parsePassEntry(relPath: string, plain: Buffer, sink: Collector, flat = false): string[] {
  return flat ? parseFlat(relPath, plain, sink) : parseStructured(relPath, plain, sink);
}

function parseFlat(relPath: string, plain: Buffer, sink: Collector): string[] {
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

const TOTP_PREFIX = Buffer.from('otpauth://totp/');

/** True when `line` (its bytes, so that no other line becomes a string) starts with otpauth://totp/ after blanks. */
function isTotpLine(line: Buffer): boolean {
  let s = 0;
  while (s < line.length && (line[s] === SPACE || line[s] === TAB)) s++;
  return line.length - s >= TOTP_PREFIX.length && line.subarray(s, s + TOTP_PREFIX.length).equals(TOTP_PREFIX);
}

/** The first line starting with otpauth://totp/, as text (it becomes the stored seed), or null. */
function findTotpLine(rest: Buffer): string | null {
  for (const line of linesOf(rest)) {
    const text = rest.subarray(line.start, line.end);
    if (isTotpLine(text)) return text.toString('utf8').trim();
  }
  return null;
}

/** One line of an entry: its text [start, end) without the line ending, and where the next line starts. */
interface Line {
  start: number;
  end: number;
  next: number;
}

function linesOf(plain: Buffer): Line[] {
  const lines: Line[] = [];
  for (let at = 0; at < plain.length; ) {
    const nl = plain.indexOf(LF, at);
    const next = nl < 0 ? plain.length : nl + 1;
    const stop = nl < 0 ? plain.length : nl;
    lines.push({ start: at, end: stop > at && plain[stop - 1] === CR ? stop - 1 : stop, next });
    at = next;
  }
  return lines;
}

const KEY_RE = /^[\p{L}\p{N}][\p{L}\p{N} _.-]{0,63}$/u;
/** The bytes a key may hold: ASCII letters, digits, ' ', '_', '.', '-', and any byte of a non-ASCII UTF-8 character. */
const KEY_BYTE = Array.from({ length: 256 }, (_, b) => b >= 0x80 || /[A-Za-z0-9 _.-]/.test(String.fromCharCode(b)));

/** A `key: value` line's key and value bytes, or null when the line is not one (see the top of this file). */
function keyLine(plain: Buffer, line: Line): { key: string; value: Buffer } | null {
  const limit = Math.min(line.end, line.start + 66);
  let colon = line.start;
  while (colon < limit && !(plain[colon] === 0x3a && (plain[colon + 1] === SPACE || plain[colon + 1] === TAB))) colon++;
  if (colon >= limit) return null;
  // Judged on the bytes first, so that a notes line holding ': ' is made a string only when it looks like a key.
  for (let b = line.start; b < colon; b++) if (!KEY_BYTE[plain[b]!]) return null;
  const key = plain.toString('utf8', line.start, colon).trimEnd();
  if (!KEY_RE.test(key)) return null;
  let from = colon + 1;
  let to = line.end;
  while (from < to && (plain[from] === SPACE || plain[from] === TAB)) from++;
  while (to > from && (plain[to - 1] === SPACE || plain[to - 1] === TAB)) to--;
  return to > from ? { key, value: plain.subarray(from, to) } : null;
}

function parseStructured(relPath: string, plain: Buffer, sink: Collector): string[] {
  const item: SourceItem = { segments: relPath.split('/'), source: `${relPath}.gpg` };
  const [first, ...rest] = linesOf(plain);
  const warnings: string[] = [];
  const seed = (text: string): string => {
    const { value, warning } = totpValue(text, relPath);
    if (warning) warnings.push(`${relPath}.gpg: ${warning}`);
    return value;
  };
  // Every line is judged before any value is added: the collector zeroes the bytes it copies.
  const adds: Array<() => void> = [];
  const notes: Line[] = [];
  rest.forEach((line, i) => {
    const at = `${relPath}.gpg line ${i + 2}`;
    const text = plain.subarray(line.start, line.end);
    if (isTotpLine(text)) {
      const value = seed(text.toString('utf8').trim());
      text.fill(0);
      adds.push(() => sink.add(fieldName(relPath, 'TOTP'), at, value, { item, field: 'totp' }));
      return;
    }
    const kv = keyLine(plain, line);
    if (kv === null) {
      notes.push(line);
      return;
    }
    const isSeed = fieldNameOf(kv.key) === 'totp';
    const value = isSeed ? seed(kv.value.toString('utf8')) : kv.value;
    if (isSeed) kv.value.fill(0);
    adds.push(() => sink.add(fieldName(relPath, kv.key), at, value, { item, field: kv.key }));
  });
  if (first !== undefined)
    sink.add(mapName(relPath), `${relPath}.gpg line 1`, plain.subarray(first.start, first.end), { item, field: null });
  for (const add of adds) add();
  while (notes.length > 0 && notes[0]!.end === notes[0]!.start) notes.shift();
  while (notes.length > 0 && notes[notes.length - 1]!.end === notes[notes.length - 1]!.start) notes.pop();
  if (notes.length > 0) {
    const parts = notes.map((l, i) => plain.subarray(l.start, i === notes.length - 1 ? l.end : l.next));
    sink.add(fieldName(relPath, 'NOTES'), `${relPath}.gpg notes`, parts, { item, field: 'notes' });
  }
  return warnings;
}
