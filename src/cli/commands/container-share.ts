/**
 * `stash container share NAME CONTACT... | unshare NAME CONTACT... |
 * members NAME [--json] | accept NAME`. Each needs the vault key: share and
 * unshare to sign the recipient list with the identity key, members to name
 * members from the contacts, accept to check the owner against them.
 */
import { StashError, errorCode } from '../../errors.js';
import {
  fingerprintOf,
  fingerprintsEqual,
  formatFingerprint,
  getContact,
  listContacts,
  parseFingerprint,
  validateContainerName,
  wipe,
  type Contact,
  type ContainerName,
} from '../../vault/index.js';
import {
  acceptShared,
  containerMembers,
  NumberingError,
  shareContainer,
  unshareContainer,
  type MemberInfo,
  type PublicIdentity,
} from '../../vault/sharing/index.js';
import { formatTable, out, outJson } from '../output.js';
import type { Invocation } from '../command-types.js';
import { Session } from '../session.js';

export async function run(inv: Invocation): Promise<number> {
  const [name, ...who] = inv.positionals as [string, ...string[]];
  validateContainerName(name); // before any password is asked
  const session = new Session(inv.values);
  try {
    const vaultKey = await session.vaultKey();
    try {
      switch (inv.command.path[1]) {
        case 'share':
          return share(session.dir, vaultKey, name, who);
        case 'unshare':
          return await unshare(session, vaultKey, name, who);
        case 'members':
          return members(session.dir, vaultKey, name, inv.values.json === true);
        default:
          return accept(session.dir, vaultKey, name);
      }
    } finally {
      wipe(vaultKey);
    }
  } finally {
    session.close();
  }
}

/** "bob <bob@example.org>" */
const label = (c: Contact): string => `${c.name} <${c.email}>`;
const fp = (k: PublicIdentity): string => formatFingerprint(fingerprintOf(k.x25519, k.ed25519));

/** A person's name for a member: "you", a contact's name, or null for someone not in the contacts. */
function namer(contacts: Contact[]): (m: PublicIdentity & { you?: boolean }) => string | null {
  return (m) =>
    m.you ? 'you' : (contacts.find((c) => c.ed25519.equals(m.ed25519) && c.x25519.equals(m.x25519))?.name ?? null);
}

function share(dir: string, vaultKey: Buffer, name: string, who: string[]): number {
  const contacts = who.map((w) => getContact(dir, vaultKey, w));
  const r = shareContainer(dir, vaultKey, name, contacts);
  const nameOf = namer(listContacts(dir, vaultKey));
  const list = (ks: PublicIdentity[]) => ks.map((k) => nameOf(k) ?? fp(k)).join(', ');
  if (r.converted) out(`${name} is now a shared container (file format 2), owned by you.`);
  if (r.changed.length > 0) {
    for (const c of contacts.filter((c) => r.changed.some((k) => k.ed25519.equals(c.ed25519))))
      out(`Shared ${name} with ${label(c)} (fingerprint ${c.fingerprint}).`);
  }
  if (r.unchanged.length > 0) out(`Already members: ${list(r.unchanged)}; nothing to change for them.`);
  if (r.changed.length > 0) {
    out(
      `${name} is at version ${r.revision}. Give the others the file (stash container export ${name} FILE), or keep it in a shared`,
    );
    out(`folder or git repository and use it there (stash container link PATH --name ${name}).`);
  }
  return 0;
}

/**
 * The members of `name` a fingerprint may name. While the file is refused for
 * its numbering, only the member who signed it: the owner may still remove them.
 */
function currentMembers(dir: string, name: string): PublicIdentity[] {
  try {
    return containerMembers(dir, name).members;
  } catch (err) {
    if (err instanceof NumberingError) return [err.writer];
    throw err;
  }
}

/** The members named on the command line: contact names, or fingerprints of members who are not contacts. */
function resolveMembers(
  dir: string,
  vaultKey: Buffer,
  name: string,
  who: string[],
): Array<PublicIdentity & { shown: string }> {
  let members: PublicIdentity[] | null = null;
  return who.map((w) => {
    try {
      const c = getContact(dir, vaultKey, w);
      return { x25519: c.x25519, ed25519: c.ed25519, shown: c.name };
    } catch (err) {
      if (errorCode(err) !== 'CONTACT_NOT_FOUND' && errorCode(err) !== 'INVALID_CONTACT') throw err;
      let asFingerprint: Buffer;
      try {
        asFingerprint = parseFingerprint(w);
      } catch {
        throw err;
      }
      members ??= currentMembers(dir, name);
      const m = members.find((x) => fingerprintsEqual(fingerprintOf(x.x25519, x.ed25519), asFingerprint));
      if (!m) throw new StashError('SHARE_NOT_MEMBER', `no member of ${name} has the fingerprint ${w}`);
      return { x25519: m.x25519, ed25519: m.ed25519, shown: fp(m) };
    }
  });
}

async function unshare(session: Session, vaultKey: Buffer, name: ContainerName, who: string[]): Promise<number> {
  const removing = resolveMembers(session.dir, vaultKey, name, who);
  const r = unshareContainer(session.dir, vaultKey, name, removing);
  // The old content key no longer opens the container; drop it from the agent rather than wait for a mismatch.
  const { containerInfo } = await import('../../vault/containers.js');
  await session.forget(Buffer.from(containerInfo(session.dir, name).id, 'hex'));
  const names = removing.map((m) => m.shown).join(', ');
  const one = removing.length === 1;
  out(`Removed ${names} from ${name} and rotated its content key (now version ${r.revision}).`);
  out(
    `${names} can no longer read later versions, but ${one ? 'keeps' : 'keep'} what they already read: every value up to version ${r.previous},`,
  );
  out(`and any copy of the file they have, which still opens with their key. Change those secrets if that matters:`);
  // The offboarding list: what they could read, remembered so `container exposure` can show it later.
  const { recordFormerMembers, readFormerMembers } = await import('../../vault/sharing/former-members.js');
  recordFormerMembers(session.dir, name, removing, r.previous);
  const { exposureOf } = await import('./container-exposure.js');
  const former = readFormerMembers(session.dir, name).filter((f) => removing.some((m) => m.ed25519.equals(f.ed25519)));
  const lists = await exposureOf(session, name, former);
  const all = lists[0]?.entries ?? [];
  if (all.length === 0) out('  (no entries)');
  for (const e of all)
    out(
      `  ${e.name}  ${e.changedAt ? `last changed ${new Date(e.changedAt).toISOString().replace('T', ' ').slice(0, 19)} UTC` : 'change time unknown'}`,
    );
  out(`This list shrinks as you change them with stash set; see it again with: stash container exposure ${name}`);
  return 0;
}

function memberJson(m: MemberInfo, nameOf: ReturnType<typeof namer>) {
  // In JSON, `name` is the contact's name (null for you, and for someone not in your contacts).
  return {
    name: m.you ? null : nameOf(m),
    fingerprint: m.fingerprint,
    owner: m.owner,
    you: m.you,
    lastWrite: m.lastWrite,
  };
}

function members(dir: string, vaultKey: Buffer, name: string, json: boolean): number {
  const r = containerMembers(dir, name);
  const nameOf = namer(listContacts(dir, vaultKey));
  if (json) {
    outJson({
      name: r.name,
      shared: r.shared,
      path: r.path,
      link: r.link,
      version: r.revision,
      epoch: r.epoch,
      members: r.members.map((m) => memberJson(m, nameOf)),
      writer: r.writer ? memberJson(r.writer, nameOf) : null,
      writtenAt: r.writtenAt?.toISOString() ?? null,
    });
    return 0;
  }
  if (!r.shared) {
    out(
      `${name} is private: only you (${r.members[0]!.fingerprint}) can open it. Share it with: stash container share ${name} CONTACT`,
    );
    return 0;
  }
  out(`Container ${name}: shared, version ${r.revision}, recipient list ${r.epoch}`);
  out(`File: ${r.path}${r.link ? ' (linked)' : ''}`);
  const rows = r.members.map((m) => [
    nameOf(m) ?? '(not in your contacts)',
    m.fingerprint,
    m.owner ? 'owner' : 'member',
    m.lastWrite === 0 ? '-' : `version ${m.lastWrite}`,
  ]);
  for (const line of formatTable(['MEMBER', 'FINGERPRINT', 'ROLE', 'LAST WROTE OR ADDED'], rows)) out(line);
  const w = r.writer!;
  out(
    `Version ${r.revision} was written by ${nameOf(w) ?? '(not in your contacts)'} (${w.fingerprint}) at ${r.writtenAt!.toISOString()}.`,
  );
  return 0;
}

function accept(dir: string, vaultKey: Buffer, name: string): number {
  const r = acceptShared(dir, vaultKey, name);
  if (r.outcome === 'unchanged') {
    out(`${name} is already at the version this vault remembers (version ${r.revision}); nothing to accept.`);
    return 0;
  }
  out(`Accepted version ${r.revision} of ${name} (${r.path}).`);
  if (r.previous) {
    out(
      `This vault had seen version ${r.previous.revision}; changes that only that version had are not in this file. Enter them again with stash set if they matter.`,
    );
  }
  return 0;
}
