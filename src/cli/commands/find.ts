/**
 * `stash find PATTERN [--json]`: CONTAINER/PATH for every entry path that
 * matches, across the containers of the vault; never a value, never a field.
 *
 * Containers whose keys the agent holds are searched first, with no
 * password. The others need the vault key, asked for once at most (it opens
 * every private container, and through the identity every shared one): it is
 * fetched once and kept for the whole search, so even without an agent to
 * cache it there is one prompt, not one per container. With no way to ask
 * (no terminal, no password source) the locked containers are skipped with a
 * warning that names them, and the open ones are still searched.
 */
import { errorCode, errorMessage } from '../../errors.js';
import { wipeEntries } from '../../vault/container-body.js';
import { listContainers, type ContainerInfo } from '../../vault/containers.js';
import { entryPaths } from '../../vault/entry-path.js';
import { byCodeUnits, type ContainerName } from '../../vault/names.js';
import { wipe } from '../../vault/secure.js';
import { readEntriesOf } from '../container-access.js';
import { out, outJson, warn } from '../output.js';
import type { Invocation } from '../command-types.js';
import { Session } from '../session.js';

interface Hit {
  container: string;
  name: string;
}

/**
 * A glob (`*`, `?`, `[...]`; the whole path must match, and `*` matches '/'
 * too, so `web/*` finds every entry under web/) when the pattern holds one of
 * those characters, else a substring. Case is ignored either way: entry names
 * are mostly upper case, what people type is not.
 */
export function nameMatcher(pattern: string): (name: string) => boolean {
  if (!/[*?[]/.test(pattern)) {
    const needle = pattern.toLowerCase();
    return (name) => name.toLowerCase().includes(needle);
  }
  let re = '';
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i]!;
    if (c === '*') re += '.*';
    else if (c === '?') re += '.';
    else if (c === '[' && pattern.indexOf(']', i + 2) > i) {
      const end = pattern.indexOf(']', i + 2);
      let set = pattern.slice(i + 1, end);
      const negate = set.startsWith('!') || set.startsWith('^');
      if (negate) set = set.slice(1);
      re += `[${negate ? '^' : ''}${set.replace(/[\\\]^]/g, '\\$&')}]`;
      i = end;
    } else re += c.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
  }
  const compiled = new RegExp(`^${re}$`, 'i');
  return (name) => compiled.test(name);
}

export async function run(inv: Invocation): Promise<number> {
  const matches = nameMatcher(inv.positionals[0]!);
  const session = new Session(inv.values);
  const hits: Hit[] = [];
  try {
    const search = async (key: Buffer, info: ContainerInfo): Promise<void> => {
      const entries = await readEntriesOf(session.dir, info, key);
      try {
        // Entry paths only: a field (stored as PATH#FIELD) is part of its entry, not an entry.
        for (const name of entryPaths(entries.keys())) if (matches(name)) hits.push({ container: info.name, name });
      } finally {
        wipeEntries(entries);
      }
    };
    const locked: ContainerName[] = [];
    for (const c of listContainers(session.dir)) {
      if (c.problem !== null) {
        warn(`skipped ${c.name}: ${c.problem}`);
        continue;
      }
      const cached = await session.cachedContentKey(c.name);
      if (!cached) {
        locked.push(c.name);
        continue;
      }
      try {
        await search(cached.key, cached.info);
      } catch (err) {
        // A key cached for an older file of that name: open it with the vault key below.
        if (errorCode(err) === 'CONTENT_KEY_MISMATCH') locked.push(c.name);
        else warn(`skipped ${c.name}: ${errorMessage(err)}`);
      } finally {
        wipe(cached.key);
      }
    }
    if (locked.length > 0) await searchLocked(session, locked, search);
  } finally {
    session.close();
  }
  hits.sort((a, b) =>
    a.container === b.container ? byCodeUnits(a.name, b.name) : byCodeUnits(a.container, b.container),
  );
  if (inv.values.json === true) outJson(hits);
  else for (const h of hits) out(`${h.container}/${h.name}`);
  // As grep does: 1 when nothing matched, so a script can test it.
  return hits.length > 0 ? 0 : 1;
}

/** The locked containers, opened with one vault key (one prompt at most). */
async function searchLocked(
  session: Session,
  names: ContainerName[],
  search: (key: Buffer, info: ContainerInfo) => Promise<void>,
): Promise<void> {
  let vaultKey: Buffer;
  try {
    vaultKey = await session.vaultKey();
  } catch (err) {
    if (errorCode(err) !== 'NO_PASSWORD_SOURCE') throw err;
    warn(`not searched, locked: ${names.join(', ')} (${errorMessage(err)})`);
    return;
  }
  try {
    for (const name of names) {
      let opened: { key: Buffer; info: ContainerInfo } | null = null;
      try {
        opened = await session.unwrapContentKey(name, vaultKey);
        await search(opened.key, opened.info);
      } catch (err) {
        // One damaged or refused container does not hide the matches in the others.
        warn(`skipped ${name}: ${errorMessage(err)}`);
      } finally {
        wipe(opened?.key);
      }
    }
  } finally {
    wipe(vaultKey);
  }
}
