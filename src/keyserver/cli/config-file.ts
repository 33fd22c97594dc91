/**
 * Reads `key = value` config files. The accepted syntax is a subset of TOML so
 * that /etc/stash/key-server.toml is also valid TOML when written with quoted
 * strings and arrays: bare or "quoted" values, true/false, integers,
 * one-line arrays for repeatable keys, and `#` comments. Repeatable keys may
 * also simply be repeated. Errors carry `file:line`.
 */
import { UsageError } from '../../errors.js';
import { optionByKey, type OptionDef } from './options.js';

/** One value for one option, with where it came from (for error messages). */
export interface RawSetting {
  def: OptionDef;
  raw: string;
  where: string;
}

/** Parses a whole file; `path` is only used in messages. */
export function parseConfigText(text: string, path: string): RawSetting[] {
  const out: RawSetting[] = [];
  const seenAt = new Map<string, number>();
  const lines = text.split(/\r?\n/);
  lines.forEach((line, index) => {
    const lineNo = index + 1;
    const at = `${path}:${lineNo}`;
    const trimmed = line.trim();
    if (trimmed === '' || trimmed.startsWith('#')) return;
    if (trimmed.startsWith('[')) throw new UsageError(`${at}: sections are not supported; write key = value lines`);
    const m = /^([A-Za-z0-9_-]+)\s*=\s*(.*)$/.exec(trimmed);
    // The line itself is not echoed: it may hold a secret (a `replication_token: ...` typo), and errors reach the log.
    if (!m)
      throw new UsageError(
        `${at}: expected key = value (the line starts with ${JSON.stringify(/^[A-Za-z0-9_-]{0,40}/.exec(trimmed)![0] || trimmed[0])})`,
      );
    const key = m[1]!;
    const def = optionByKey.get(key);
    if (!def) {
      const underscored = key.replace(/-/g, '_');
      const hint =
        key === 'bind'
          ? ' (the config key of --bind is bind_addr)'
          : key.includes('-') && optionByKey.has(underscored)
            ? ` (config keys use underscores: ${underscored})`
            : '';
      throw new UsageError(`${at}: unknown key ${JSON.stringify(key)}${hint}`);
    }
    const where = `${at}: ${key}`;
    const values = parseValue(m[2]!, where);
    if (values.length === 0) throw new UsageError(`${where} needs a value`);
    if (!def.repeatable) {
      if (values.length > 1 || values.isArray) throw new UsageError(`${where} takes one value, not a list`);
      const earlier = seenAt.get(key);
      if (earlier !== undefined) throw new UsageError(`${where} is given twice (first on line ${earlier})`);
      seenAt.set(key, lineNo);
    }
    for (const raw of values) out.push({ def, raw, where });
  });
  return out;
}

type Values = string[] & { isArray?: boolean };

function parseValue(text: string, where: string): Values {
  const s = text.trim();
  if (s.startsWith('[')) {
    const values: Values = [];
    values.isArray = true;
    let rest = s.slice(1).trim();
    while (!rest.startsWith(']')) {
      if (rest === '') throw new UsageError(`${where}: unterminated list (lists must be on one line)`);
      const item = readItem(rest, where);
      values.push(item.value);
      rest = item.rest.trim();
      if (rest.startsWith(',')) rest = rest.slice(1).trim();
      else if (rest === '') throw new UsageError(`${where}: unterminated list (lists must be on one line)`);
      else if (!rest.startsWith(']')) throw new UsageError(`${where}: expected , or ] in list`);
    }
    expectEnd(rest.slice(1), where);
    return values;
  }
  if (s.startsWith('"')) {
    const item = readQuoted(s, where);
    expectEnd(item.rest, where);
    return [item.value];
  }
  const hash = s.indexOf('#');
  const bare = (hash < 0 ? s : s.slice(0, hash)).trim();
  return bare === '' ? [] : [bare];
}

function readItem(s: string, where: string): { value: string; rest: string } {
  if (s.startsWith('"')) return readQuoted(s, where);
  const m = /^([^,\]\s]+)/.exec(s);
  if (!m) throw new UsageError(`${where}: expected a value in list`);
  return { value: m[1]!, rest: s.slice(m[1]!.length) };
}

const escapes: Record<string, string> = { '"': '"', '\\': '\\', n: '\n', t: '\t' };

function readQuoted(s: string, where: string): { value: string; rest: string } {
  let value = '';
  for (let i = 1; i < s.length; i++) {
    const ch = s[i]!;
    if (ch === '"') return { value, rest: s.slice(i + 1) };
    if (ch === '\\') {
      const next = s[i + 1];
      const mapped = next === undefined ? undefined : escapes[next];
      if (mapped === undefined) throw new UsageError(`${where}: unsupported escape \\${next ?? ''} in quoted value`);
      value += mapped;
      i++;
    } else {
      value += ch;
    }
  }
  throw new UsageError(`${where}: unterminated quoted value`);
}

function expectEnd(rest: string, where: string): void {
  const r = rest.trim();
  if (r !== '' && !r.startsWith('#'))
    throw new UsageError(`${where}: unexpected text after the value (not shown: it may be part of a secret)`);
}
