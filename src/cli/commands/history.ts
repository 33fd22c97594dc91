/**
 * An entry's previous values (src/vault/entry-history.ts): `stash history
 * [CONTAINER] NAME [--json]` lists them (sizes and times, never a value),
 * `stash restore CONTAINER NAME --version N` makes one current again, and
 * selectVersion() is what `get --version N` prints. Version 1 is the value
 * before the current one, 2 the one before that, and so on.
 */
import { StashError, UsageError } from '../../errors.js';
import { changeTime, historyOf, wipeEntries, type Entries } from '../../vault/container-body.js';
import { entryNotFound } from '../../vault/containers.js';
import { MAX_HISTORY_KEEP } from '../../vault/history-block.js';
import { fieldKey, splitKey, validateFieldName } from '../../vault/entry-path.js';
import type { ContainerName } from '../../vault/names.js';
import { secureCopy, wipe } from '../../vault/secure.js';
import { historyPolicy, readEntriesOf, updateEntriesOf } from '../container-access.js';
import { formatTable, note, out, outJson } from '../output.js';
import type { Invocation } from '../command-types.js';
import { entryTarget } from '../entry-target.js';
import { Session } from '../session.js';

/** The N of --version: a whole number from 1 to MAX_HISTORY_KEEP, else a usage error. */
export function parseVersion(raw: unknown): number {
  const n = typeof raw === 'string' && /^[0-9]{1,3}$/.test(raw) ? Number(raw) : NaN;
  if (!Number.isInteger(n) || n < 1 || n > MAX_HISTORY_KEEP) {
    throw new UsageError(
      `--version takes a whole number from 1 (the value before the current one) to ${MAX_HISTORY_KEEP}, got ${JSON.stringify(String(raw).slice(0, 40))}`,
    );
  }
  return n;
}

/** Stored key `key` as the user names it: `web/x`, or `field username of web/x` (after `container`, when given). */
function label(key: string, container = ''): string {
  const { path, field } = splitKey(key);
  return field === null ? `${container}${path}` : `field ${field} of ${container}${path}`;
}

/** Stored key `key` as command arguments: `web/x`, or `web/x --field username`. */
function args(key: string): string {
  const { path, field } = splitKey(key);
  return field === null ? path : `${path} --field ${field}`;
}

export interface Selected {
  /** A view into `entries`: copy it before they are wiped. */
  value: Uint8Array;
  changedAt: number;
  /** When it stopped being current; null for the current value. */
  replacedAt: number | null;
}

/**
 * The current value of NAME (version null) or its previous value N.
 * ENTRY_NOT_FOUND when there is no such entry or version, saying how many
 * previous values there are.
 */
export function selectVersion(entries: Entries, container: string, name: string, version: number | null): Selected {
  const current = entries.get(name);
  const past = historyOf(entries).get(name) ?? [];
  if (version === null) {
    if (current === undefined) throw entryNotFound(container, name, entries.keys());
    return { value: current, changedAt: changeTime(entries, name), replacedAt: null };
  }
  const v = past[version - 1];
  if (v === undefined) {
    if (current === undefined && past.length === 0)
      throw entryNotFound(container, name, [...entries.keys(), ...historyOf(entries).keys()]);
    const kept =
      past.length === 0
        ? 'no previous values'
        : `${past.length} previous value${past.length === 1 ? '' : 's'} (versions 1 to ${past.length})`;
    throw new StashError(
      'ENTRY_NOT_FOUND',
      `${label(name, `${container}/`)} has ${kept}; there is no version ${version} (see stash history ${container} ${args(name)})`,
    );
  }
  return { value: v.value, changedAt: v.changedAt, replacedAt: v.replacedAt };
}

export async function run(inv: Invocation): Promise<number> {
  const { container, path } = await entryTarget(inv);
  const field = inv.values.field;
  if (field !== undefined) validateFieldName(field);
  // A field's history is kept under its stored key, PATH#FIELD, beside the value's.
  const name = field === undefined ? path : fieldKey(path, field);
  const restore = inv.command.path[0] === 'restore';
  if (restore && inv.values.version === undefined)
    throw new UsageError('restore needs --version N (see stash history CONTAINER PATH)');
  const version = restore ? parseVersion(inv.values.version) : null;
  const session = new Session(inv.values);
  try {
    return version !== null
      ? await restoreVersion(session, container, name, version)
      : await list(session, container, name, inv.values.json === true);
  } finally {
    session.close();
  }
}

interface Row {
  version: number | null;
  size: number;
  changedAt: number;
  replacedAt: number | null;
}

function iso(t: number | null): string | null {
  return t !== null && t > 0 ? new Date(t).toISOString() : null;
}

async function list(session: Session, container: ContainerName, name: string, json: boolean): Promise<number> {
  const rows = await session.withContentKey(container, async (key, info): Promise<Row[]> => {
    const entries = await readEntriesOf(session.dir, info, key);
    try {
      const current = entries.get(name);
      const past = historyOf(entries).get(name) ?? [];
      if (current === undefined && past.length === 0)
        throw entryNotFound(container, name, [...entries.keys(), ...historyOf(entries).keys()]);
      const head: Row[] =
        current === undefined
          ? []
          : [{ version: null, size: current.length, changedAt: changeTime(entries, name), replacedAt: null }];
      return [
        ...head,
        ...past.map((v, i) => ({
          version: i + 1,
          size: v.value.length,
          changedAt: v.changedAt,
          replacedAt: v.replacedAt,
        })),
      ];
    } finally {
      wipeEntries(entries);
    }
  });
  const current = rows.find((r) => r.version === null);
  const versions = rows.filter((r) => r.version !== null);
  if (json) {
    const { path, field } = splitKey(name);
    outJson({
      container,
      name: path,
      ...(field === null ? {} : { field }),
      current: current ? { size: current.size, changedAt: iso(current.changedAt) } : null,
      versions: versions.map((r) => ({
        version: r.version,
        size: r.size,
        changedAt: iso(r.changedAt),
        replacedAt: iso(r.replacedAt),
      })),
    });
    return 0;
  }
  const when = (t: number | null): string => {
    const s = iso(t);
    return s ? `${s.replace('T', ' ').slice(0, 19)} UTC` : '-';
  };
  const table = rows.map((r) => [
    r.version === null ? 'current' : String(r.version),
    String(r.size),
    when(r.changedAt),
    r.version === null ? '-' : when(r.replacedAt),
  ]);
  for (const line of formatTable(['VERSION', 'BYTES', 'CHANGED', 'REPLACED'], table)) out(line);
  if (!current)
    out(`${label(name)} was removed; stash restore ${container} ${args(name)} --version 1 brings its last value back.`);
  else if (versions.length === 0) out(`No previous values of ${label(name)} yet.`);
  return 0;
}

async function restoreVersion(
  session: Session,
  container: ContainerName,
  name: string,
  version: number,
): Promise<number> {
  const changed = await session.withContentKey(container, async (key, info) => {
    const entries = await readEntriesOf(session.dir, info, key);
    let value: Buffer;
    try {
      value = secureCopy(selectVersion(entries, container, name, version).value);
    } finally {
      wipeEntries(entries);
    }
    try {
      // An ordinary write: the value it replaces becomes version 1, so a restore can be undone the same way.
      return await updateEntriesOf(session, info, key, new Map([[name, value]]));
    } finally {
      wipe(value);
    }
  });
  if (changed.length === 0) {
    note(`Version ${version} of ${label(name)} is its current value already; nothing was written.`);
    return 0;
  }
  const { keep } = await historyPolicy();
  note(
    keep === 0
      ? `Restored version ${version} of ${label(name)} in ${container}; the value it replaced is not kept (vault.history_keep = 0).`
      : `Restored version ${version} of ${label(name)} in ${container}; the value it replaced is now version 1 (stash history ${container} ${args(name)}).`,
  );
  return 0;
}
