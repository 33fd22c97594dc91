/**
 * `stash container exposure NAME [--member NAME|FINGERPRINT] [--json]`: for
 * every former member of a shared container (removed by this vault's
 * unshare), the entries whose value they could read and that nobody has
 * changed since: each entry whose last change is not after the removal
 * (sharing/former-members.ts). Names and change times only, never values.
 * The change times are the writers' clocks, so a clock far behind could
 * hide an entry: a change after the removal counts only when it says so.
 */
import { StashError, errorCode } from '../../errors.js';
import {
  changeTime,
  fingerprintOf,
  fingerprintsEqual,
  formatFingerprint,
  listContacts,
  parseFingerprint,
  validateContainerName,
  wipeEntries,
  type Contact,
  type ContainerName,
} from '../../vault/index.js';
import { wipe } from '../../vault/secure.js';
import { exposedEntries, readFormerMembers, type FormerMember } from '../../vault/sharing/former-members.js';
import { readEntriesOf } from '../container-access.js';
import { out, outJson } from '../output.js';
import type { Invocation } from '../command-types.js';
import { Session } from '../session.js';

export interface Exposure {
  member: FormerMember;
  fingerprint: string;
  entries: Array<{ name: string; changedAt: number }>;
}

/** The exposure of each of `former`, from the container's current entries. */
export async function exposureOf(session: Session, name: ContainerName, former: FormerMember[]): Promise<Exposure[]> {
  const current = await session.withContentKey(name, async (key, info) => {
    const entries = await readEntriesOf(session.dir, info, key);
    try {
      return [...entries.keys()].map((n) => ({ name: n, changedAt: changeTime(entries, n) }));
    } finally {
      wipeEntries(entries);
    }
  });
  return former.map((m) => ({
    member: m,
    fingerprint: formatFingerprint(fingerprintOf(m.x25519, m.ed25519)),
    entries: exposedEntries(m, current),
  }));
}

export async function run(inv: Invocation): Promise<number> {
  const name = inv.positionals[0]!;
  validateContainerName(name);
  const session = new Session(inv.values);
  try {
    let former = readFormerMembers(session.dir, name);
    // Contact names for people (the contacts are encrypted: the vault key opens them).
    const vaultKey = await session.vaultKey();
    let contacts: Contact[];
    try {
      contacts = listContacts(session.dir, vaultKey);
    } finally {
      wipe(vaultKey);
    }
    const who = (m: FormerMember): string | null => contacts.find((c) => c.ed25519.equals(m.ed25519))?.name ?? null;
    const filter = typeof inv.values.member === 'string' ? inv.values.member : null;
    if (filter !== null) {
      let fp: Buffer | null = null;
      try {
        fp = parseFingerprint(filter);
      } catch (err) {
        if (errorCode(err) === undefined) throw err;
      }
      former = former.filter(
        (m) => who(m) === filter || (fp !== null && fingerprintsEqual(fingerprintOf(m.x25519, m.ed25519), fp)),
      );
      if (former.length === 0)
        throw new StashError('SHARE_NOT_MEMBER', `${filter} is not a former member of ${name} (removed by this vault)`);
    }
    const lists = await exposureOf(session, name, former);
    if (inv.values.json === true) {
      outJson(
        lists.map((l) => ({
          member: who(l.member),
          fingerprint: l.fingerprint,
          removedAt: new Date(l.member.removedAt).toISOString(),
          lastVersion: l.member.lastRevision,
          entries: l.entries.map((e) => ({
            name: e.name,
            changedAt: e.changedAt ? new Date(e.changedAt).toISOString() : null,
          })),
        })),
      );
      return 0;
    }
    if (lists.length === 0) {
      out(`No former members of ${name}: nobody has been removed from it by this vault.`);
      return 0;
    }
    for (const l of lists) {
      const label = who(l.member) ?? '(not in your contacts)';
      out(
        `${label} ${l.fingerprint}, removed ${new Date(l.member.removedAt).toISOString()} (could open up to version ${l.member.lastRevision}):`,
      );
      if (l.entries.length === 0) out('  nothing they read is still current');
      for (const e of l.entries)
        out(
          `  ${e.name}  ${e.changedAt ? `last changed ${new Date(e.changedAt).toISOString().replace('T', ' ').slice(0, 19)} UTC` : 'change time unknown'}`,
        );
    }
    return 0;
  } finally {
    session.close();
  }
}
