/**
 * Who may open a shared container: the owner adds recipients (share), removes
 * them with a new content key (unshare), and anyone can list them (members).
 *
 * Sharing a private (version 1) container converts it in place: the same
 * container id and content key, now sealed to each recipient instead of
 * wrapped by the vault key, so keys cached in the agent stay valid.
 */
import { withChangeTimes, withHistory, type Entries } from '../container-body.js';
import { readEntries, unwrapContentKey, wipeEntries } from '../containers.js';
import { VaultError } from '../errors.js';
import { fingerprintOf, formatFingerprint } from '../fingerprint.js';
import { readBounded } from '../fs-atomic.js';
import { identityPublic, identitySecret, type IdentitySecret } from '../identity.js';
import { withVaultLock } from '../lock.js';
import { requireVaultKey } from '../meta-file.js';
import { validateContainerName } from '../names.js';
import { vaultPaths } from '../paths.js';
import { wipe } from '../secure.js';
import { containerVersion, MAX_SHARED_FILE_BYTES, stanzaIndex, type Stanza } from './format.js';
import { NumberingError, restartWrite } from './numbering.js';
import { readRecord, type SharedRecord } from './records.js';
import { assembleFile, commitRevision, nextWrite, signedMembership, withWriteLock } from './revisions.js';
import { myIdentity, openSharedBody, openStanza } from './shared-entries.js';
import { rekeyAndCommit } from './reseal.js';
import { loadRefusedNumbering, loadVerified, type LoadedShared, type PublicIdentity } from './verify.js';

export interface MembershipChange {
  /** Members added or removed by this call. */
  changed: PublicIdentity[];
  /** Members asked for that needed no change (already in, for share). */
  unchanged: PublicIdentity[];
  revision: number;
  /** The version it replaced (0 for a private container converted). */
  previous: number;
  epoch: number;
  /** True when a private container became a shared one. */
  converted: boolean;
}

const same = (a: PublicIdentity, b: PublicIdentity) => a.ed25519.equals(b.ed25519) && a.x25519.equals(b.x25519);
const fp = (k: PublicIdentity) => formatFingerprint(fingerprintOf(k.x25519, k.ed25519));

function notOwner(l: LoadedShared): VaultError {
  const owner = l.file.membership.stanzas[0]!;
  return new VaultError(
    'SHARE_NOT_OWNER',
    `only the owner of ${l.name} (${fp(owner)}) can change who it is shared with`,
  );
}

/** Runs `fn` with this vault's identity (public keys authenticated by the vault key, secret keys open). */
function withIdentity<T>(dir: string, vaultKey: Buffer, fn: (me: PublicIdentity, secret: IdentitySecret) => T): T {
  requireVaultKey(dir, vaultKey);
  const pub = identityPublic(dir, vaultKey);
  const secret = identitySecret(dir, vaultKey);
  try {
    return fn({ x25519: pub.x25519, ed25519: pub.ed25519 }, secret);
  } finally {
    wipe(secret.x25519);
    wipe(secret.ed25519);
  }
}

/**
 * The entries with their change times but none of their previous values: a
 * person added to a container reads what is current from then on, not the
 * values replaced before they joined (docs/cli.md, "Entry history"). The
 * values stay views into `entries`, which the caller wipes.
 */
function withoutHistory(entries: Entries): Entries {
  return withHistory(withChangeTimes(new Map(entries), entries, []), new Map());
}

/** Converts private container `name` into a shared one owned by `me`, readable by `others`. */
function convert(
  dir: string,
  vaultKey: Buffer,
  name: string,
  me: PublicIdentity,
  secret: IdentitySecret,
  others: PublicIdentity[],
  v1Bytes: Buffer,
): MembershipChange {
  const path = vaultPaths(dir).container(name);
  const key = unwrapContentKey(dir, vaultKey, name);
  const entries = readEntries(dir, name, key);
  try {
    const containerId = Buffer.from(v1Bytes.subarray(26, 42)); // version 1 header: container id at offset 26
    const { bytes: membership, stanzas } = signedMembership(containerId, 1, key, [me, ...others], secret.ed25519);
    const write = nextWrite(null, stanzas, me.ed25519);
    const bytes = assembleFile(membership, stanzas.length, write, key, withoutHistory(entries), secret.ed25519);
    commitRevision(dir, path, v1Bytes, bytes, { name, containerId, owner: me, link: null });
    return { changed: others, unchanged: [], revision: write.revision, previous: 0, epoch: 1, converted: true };
  } finally {
    wipeEntries(entries);
    wipe(key);
  }
}

/**
 * Adds `contacts` as recipients of container `name` (owner only). A private
 * container is converted to a shared one first. Contacts already in the list
 * are reported as unchanged; nothing is written when all are.
 */
export function shareContainer(
  dir: string,
  vaultKey: Buffer,
  name: string,
  contacts: PublicIdentity[],
): MembershipChange {
  validateContainerName(name);
  return withIdentity(dir, vaultKey, (me, secret) =>
    withVaultLock(dir, () =>
      withWriteLock(dir, name, () => {
        if (contacts.some((c) => same(c, me)))
          throw new VaultError('INVALID_ARGUMENT', 'you are the owner already; share with your contacts');
        const wanted = contacts.filter((c, i) => contacts.findIndex((d) => same(c, d)) === i);
        const v1Bytes = privateContainer(dir, name);
        if (v1Bytes !== null) return convert(dir, vaultKey, name, me, secret, wanted, v1Bytes);
        return addRecipients(dir, name, me, secret, wanted);
      }),
    ),
  );
}

/**
 * The file of container `name` when it is private (version 1, with no record
 * of sharing); null when it is shared. CONTAINER_NOT_FOUND when there is none.
 */
function privateContainer(dir: string, name: string): Buffer | null {
  if (readRecord(dir, name)) return null;
  const path = vaultPaths(dir).container(name);
  const bytes = readBounded(
    path,
    MAX_SHARED_FILE_BYTES,
    () => new VaultError('CONTAINER_CORRUPT', `${path} is not a container file of a plausible size`),
  );
  if (bytes === null)
    throw new VaultError('CONTAINER_NOT_FOUND', `no container named ${JSON.stringify(name)} in the vault at ${dir}`);
  return containerVersion(bytes) === 1 ? bytes : null;
}

/** Adds those of `wanted` not yet on the recipient list of shared container `name` (owner only). */
function addRecipients(
  dir: string,
  name: string,
  me: PublicIdentity,
  secret: IdentitySecret,
  wanted: PublicIdentity[],
): MembershipChange {
  const l = loadVerified(dir, name, me);
  const m = l.file.membership;
  if (!same(m.stanzas[0]!, me)) throw notOwner(l);
  const current: PublicIdentity[] = m.stanzas.map((s) => ({ x25519: s.x25519, ed25519: s.ed25519 }));
  const added = wanted.filter((c) => !current.some((s) => same(s, c)));
  const unchanged = wanted.filter((c) => current.some((s) => same(s, c)));
  for (const c of added) {
    if (stanzaIndex(m, c.ed25519) >= 0)
      throw new VaultError(
        'INVALID_ARGUMENT',
        `a member of ${name} has the signing key of ${fp(c)} with another encryption key`,
      );
  }
  const previous = l.file.write.revision;
  if (added.length === 0)
    return { changed: [], unchanged, revision: previous, previous, epoch: m.epoch, converted: false };
  const revision = commitRecipients(dir, l, me, secret, [...current, ...added]);
  return { changed: added, unchanged, revision, previous, epoch: m.epoch + 1, converted: false };
}

/**
 * Commits the next version of `l` with recipient list `members` (the next
 * epoch, the same content key) and its current entries without their history;
 * the revision written.
 */
function commitRecipients(
  dir: string,
  l: LoadedShared & { record: SharedRecord },
  me: PublicIdentity,
  secret: IdentitySecret,
  members: PublicIdentity[],
): number {
  const m = l.file.membership;
  const key = openStanza(l, me, secret.x25519);
  const entries = openSharedBody(l, key);
  try {
    const { bytes: membership, stanzas } = signedMembership(
      m.containerId,
      m.epoch + 1,
      key,
      members,
      secret.ed25519,
      m.stanzas,
    );
    const write = nextWrite(l.file, stanzas, me.ed25519);
    const bytes = assembleFile(membership, stanzas.length, write, key, withoutHistory(entries), secret.ed25519);
    commitRevision(dir, l.path, l.bytes, bytes, l.record);
    return write.revision;
  } finally {
    wipeEntries(entries);
    wipe(key);
  }
}

/**
 * Removes `members` from container `name` (owner only) and rotates the
 * content key: a new random key, the body re-encrypted, every remaining
 * recipient's stanza sealed anew. Removed members keep whatever they already
 * read, and every earlier copy of the file still opens with their key.
 *
 * A file refused for its numbering (numbering.ts) is the one exception to
 * "every check passes first": when its writer is among `members`, the new
 * version is built from it (its entries, its recipient list less them) and
 * numbered again from the version this vault saw last.
 */
export function unshareContainer(
  dir: string,
  vaultKey: Buffer,
  name: string,
  members: PublicIdentity[],
): MembershipChange {
  validateContainerName(name);
  return withIdentity(dir, vaultKey, (me, secret) =>
    withVaultLock(dir, () =>
      withWriteLock(dir, name, () => {
        if (!readRecord(dir, name)) {
          const path = vaultPaths(dir).container(name);
          const prefix = readBounded(
            path,
            MAX_SHARED_FILE_BYTES,
            () => new VaultError('CONTAINER_CORRUPT', `${path} is not a container file of a plausible size`),
          );
          if (prefix !== null && containerVersion(prefix) === 1)
            throw new VaultError('SHARE_NOT_SHARED', `container ${name} is not shared with anyone`);
        }
        let l: LoadedShared & { record: SharedRecord };
        let restart = false;
        try {
          l = loadVerified(dir, name, me);
        } catch (err) {
          // A version numbered to stop every later write: its writer can still be removed.
          if (!(err instanceof NumberingError) || !members.some((k) => same(k, err.writer))) throw err;
          l = loadRefusedNumbering(dir, name, me, err);
          restart = true;
        }
        const m = l.file.membership;
        if (!same(m.stanzas[0]!, me)) throw notOwner(l);
        for (const k of members) {
          const i = m.stanzas.findIndex((s) => same(s, k));
          if (i === 0) throw new VaultError('INVALID_ARGUMENT', `the owner cannot be removed from ${name}`);
          if (i < 0) throw new VaultError('SHARE_NOT_MEMBER', `${fp(k)} is not a member of ${name}`);
        }
        const kept = m.stanzas
          .filter((s) => !members.some((k) => same(s, k)))
          .map((s) => ({ x25519: s.x25519, ed25519: s.ed25519 }));
        const restarted = restart ? (stanzas: Stanza[]) => restartWrite(l.record.seen, stanzas, me.ed25519) : undefined;
        const write = rekeyAndCommit(dir, l, me, secret, kept, me, secret, restarted);
        return {
          changed: members,
          unchanged: [],
          revision: write.revision,
          previous: l.file.write.revision,
          epoch: m.epoch + 1,
          converted: false,
        };
      }),
    ),
  );
}

export interface MemberInfo extends PublicIdentity {
  fingerprint: string;
  owner: boolean;
  you: boolean;
  /** The revision this member last wrote (0: never). */
  lastWrite: number;
}

export interface MembersReport {
  name: string;
  shared: boolean;
  path: string;
  link: string | null;
  revision: number | null;
  epoch: number | null;
  members: MemberInfo[];
  /** Who signed the current revision, and when; null for a private container. */
  writer: MemberInfo | null;
  writtenAt: Date | null;
}

/**
 * The owner, the recipients and who wrote the current revision, after the
 * same checks as a read. No key is needed. A private container reports its
 * owner (this vault) alone.
 */
export function containerMembers(dir: string, name: string): MembersReport {
  validateContainerName(name);
  const me = myIdentity(dir);
  if (privateContainer(dir, name) !== null) {
    const self: MemberInfo = { ...me, fingerprint: fp(me), owner: true, you: true, lastWrite: 0 };
    return {
      name,
      shared: false,
      path: vaultPaths(dir).container(name),
      link: null,
      revision: null,
      epoch: null,
      members: [self],
      writer: null,
      writtenAt: null,
    };
  }
  const l = loadVerified(dir, name, me);
  const members = l.file.membership.stanzas.map(
    (s, i): MemberInfo => ({
      x25519: s.x25519,
      ed25519: s.ed25519,
      fingerprint: fp(s),
      owner: i === 0,
      you: same(s, me),
      lastWrite: l.file.write.lastWrites[i]!,
    }),
  );
  return {
    name,
    shared: true,
    path: l.path,
    link: l.record.link,
    revision: l.file.write.revision,
    epoch: l.file.membership.epoch,
    members,
    writer: members.find((x) => x.ed25519.equals(l.file.write.writer)) ?? null,
    writtenAt: new Date(l.file.write.writtenAt),
  };
}
