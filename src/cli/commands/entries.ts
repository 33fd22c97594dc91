/**
 * `stash ls [CONTAINER] [--json]` and `stash rm [CONTAINER] NAME [--purge]`. ls
 * shows each entry's name, size and last change, never a value; rm deletes
 * one entry, its value kept in its history (`--purge` drops that too). The
 * content key is unchanged, so keys cached in the agent stay valid.
 * Both work on private and shared containers (container-access.ts).
 */
import { changeTime, type ContainerName, VaultError, wipeEntries } from '../../vault/index.js';
import { historyPolicy, readEntriesOf, updateEntriesOf } from '../container-access.js';
import { isTotpValue } from '../totp/otpauth.js';
import { formatTable, note, out, outJson } from '../output.js';
import type { Invocation } from '../command-types.js';
import { containerTarget, entryTarget } from '../entry-target.js';
import { Session } from '../session.js';

interface EntryRow {
  name: string;
  /** Bytes of the value. */
  size: number;
  /** Null when unknown (written by a stash that did not record change times). */
  changedAt: Date | null;
  /** A TOTP seed (`stash otp` prints its code). */
  totp: boolean;
}

export async function run(inv: Invocation): Promise<number> {
  const isList = inv.command.path[0] === 'ls';
  const target = isList ? { container: await containerTarget(inv), path: null } : await entryTarget(inv);
  const { container } = target;
  const session = new Session(inv.values);
  try {
    return target.path === null
      ? await list(session, container, inv.values.json === true)
      : await remove(session, container, target.path, inv.values.purge === true);
  } finally {
    session.close();
  }
}

async function list(session: Session, container: ContainerName, json: boolean): Promise<number> {
  const rows = await session.withContentKey(container, async (key, info): Promise<EntryRow[]> => {
    const entries = await readEntriesOf(session.dir, info, key);
    try {
      return [...entries].map(([name, value]) => {
        const t = changeTime(entries, name);
        return { name, size: value.length, changedAt: t > 0 ? new Date(t) : null, totp: isTotpValue(value) };
      });
    } finally {
      wipeEntries(entries);
    }
  });
  if (json) {
    outJson(
      rows.map((r) => ({ name: r.name, size: r.size, changedAt: r.changedAt?.toISOString() ?? null, totp: r.totp })),
    );
    return 0;
  }
  if (rows.length === 0) {
    out(`No entries in ${container} yet: add one with \`stash set ${container} NAME\`.`);
    return 0;
  }
  const when = (d: Date | null): string => (d ? `${d.toISOString().replace('T', ' ').slice(0, 19)} UTC` : '-');
  // The KIND column appears once there is something other than plain secrets to tell apart.
  const kinds = rows.some((r) => r.totp);
  const table = rows.map((r) => [r.name, String(r.size), when(r.changedAt), ...(kinds ? [r.totp ? 'totp' : '-'] : [])]);
  for (const line of formatTable(['NAME', 'BYTES', 'CHANGED', ...(kinds ? ['KIND'] : [])], table)) out(line);
  return 0;
}

async function remove(session: Session, container: ContainerName, name: string, purge: boolean): Promise<number> {
  const changed = await session.withContentKey(container, (key, info) =>
    updateEntriesOf(session, info, key, new Map([[name, null]]), { purge: purge ? [name] : [] }),
  );
  if (changed.length === 0) {
    throw new VaultError(
      'ENTRY_NOT_FOUND',
      `container ${JSON.stringify(container)} has no entry ${name}${purge ? ' and no history of one' : ''}; nothing was removed (see stash ls ${container})`,
    );
  }
  const { keep } = await historyPolicy();
  note(
    purge
      ? `Removed ${name} and its previous values from ${container}.`
      : keep === 0
        ? `Removed ${name} from ${container} (vault.history_keep = 0: no previous value is kept).`
        : `Removed ${name} from ${container}; its previous values are kept (stash history ${container} ${name}; rm --purge drops them).`,
  );
  return 0;
}
