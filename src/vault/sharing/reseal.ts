/**
 * Re-sealing a shared container this vault owns when an identity changes
 * (docs/vault.md, "Identity rotation"): the owner's own keys (its rotation),
 * or a member's keys (that member's rotation, accepted by the owner). Either
 * way the content key is replaced, as unshare does: the old secret key may be
 * in someone else's hands, and it opened the old content key.
 */
import { VaultError } from '../errors.js';
import type { IdentitySecret } from '../identity.js';
import { withVaultLock } from '../lock.js';
import { KEY_BYTES, secureRandom, wipe } from '../secure.js';
import { wipeEntries } from '../containers.js';
import { assembleFile, commitRevision, nextWrite, signedMembership, withWriteLock } from './revisions.js';
import { openSharedBody, openStanza } from './shared-entries.js';
import type { Stanza, WriteInfo } from './format.js';
import { writeRecord, type SharedRecord } from './records.js';
import {
  checkHistory,
  loadShared,
  loadVerified,
  recipientIndex,
  verifySignatures,
  type LoadedShared,
  type PublicIdentity,
} from './verify.js';

export interface ResealOptions {
  /** The identity the container is read as: its current owner, this vault (before a rotation: the old keys). */
  as: PublicIdentity;
  asSecret: IdentitySecret;
  /** The owner after the re-seal (the new keys after a rotation, else `as`) and its secret keys, which sign. */
  owner: PublicIdentity;
  ownerSecret: IdentitySecret;
  /** Member keys replaced by others (a contact's rotation); the owner's own change is `owner`. */
  replace?: Array<{ from: PublicIdentity; to: PublicIdentity }>;
}

const same = (a: PublicIdentity, b: PublicIdentity) => a.ed25519.equals(b.ed25519) && a.x25519.equals(b.x25519);

/**
 * Writes a new version of container `name` with the keys changed as `opts`
 * says and a new content key. Null when nothing would change (no member to
 * replace, the owner already `opts.owner`): nothing is written then.
 */
export function resealContainer(
  dir: string,
  name: string,
  opts: ResealOptions,
): { revision: number; epoch: number } | null {
  return withVaultLock(dir, () =>
    withWriteLock(dir, name, () => {
      const l = loadVerified(dir, name, opts.as);
      const m = l.file.membership;
      if (!same(m.stanzas[0]!, opts.as))
        throw new VaultError('SHARE_NOT_OWNER', `only the owner of ${name} can re-seal it`);
      let changed = !same(opts.as, opts.owner);
      const members: PublicIdentity[] = [opts.owner];
      for (const s of m.stanzas.slice(1)) {
        const swap = opts.replace?.find((r) => same(r.from, s));
        if (swap) changed = true;
        const k = swap ? swap.to : { x25519: s.x25519, ed25519: s.ed25519 };
        // The new key may be a member already (shared with it after a fingerprint check): once is enough.
        if (!members.some((x) => same(x, k) || x.ed25519.equals(k.ed25519) || x.x25519.equals(k.x25519)))
          members.push(k);
      }
      if (!changed) return null;
      const write = rekeyAndCommit(dir, l, opts.as, opts.asSecret, members, opts.owner, opts.ownerSecret);
      return { revision: write.revision, epoch: m.epoch + 1 };
    }),
  );
}

/**
 * Finishes a re-seal from `from` to `to` that a crash cut between its two
 * writes (commitRevision writes the file, then the record): the file is
 * already owned and signed by `to`, while the record still pins `from`, so
 * every read refuses it. When the file's recipient list names `to` as owner,
 * verifies under `to` (whose secret key never left this vault), lists `to`,
 * and follows the revision the record saw, the record is pinned to `to` and
 * the file's revision returned. Null, with nothing written, when the file is
 * not such a re-seal; a file that claims to be one but fails a check throws.
 */
export function repinResealed(
  dir: string,
  name: string,
  from: PublicIdentity,
  to: PublicIdentity,
): { revision: number } | null {
  return withVaultLock(dir, () =>
    withWriteLock(dir, name, () => {
      const l = loadShared(dir, name);
      if (!l.record || !same(l.record.owner, from) || !same(l.file.membership.stanzas[0]!, to)) return null;
      const record = { ...l.record, owner: { x25519: to.x25519, ed25519: to.ed25519 } };
      verifySignatures(l.file, l.path, record.owner, name);
      if (checkHistory({ ...l, record }, to, dir) !== 'newer') return null;
      recipientIndex(l, to);
      writeRecord(dir, { ...record, seen: l.next });
      return { revision: l.file.write.revision };
    }),
  );
}

/**
 * Writes the next version of `l` for `members` (the owner first) under a new
 * random content key: the entries read with `reader`'s stanza, the recipient
 * list and the write signed by `owner`, the record pinned to `owner`. `write`
 * numbers it (default: the revision after `l`). Unshare and re-seal share it.
 */
export function rekeyAndCommit(
  dir: string,
  l: LoadedShared & { record: SharedRecord },
  reader: PublicIdentity,
  readerSecret: IdentitySecret,
  members: PublicIdentity[],
  owner: PublicIdentity,
  ownerSecret: IdentitySecret,
  write?: (stanzas: Stanza[]) => WriteInfo,
): WriteInfo {
  const m = l.file.membership;
  const oldKey = openStanza(l, reader, readerSecret.x25519);
  let entries;
  try {
    entries = openSharedBody(l, oldKey);
  } finally {
    wipe(oldKey);
  }
  const newKey = secureRandom(KEY_BYTES);
  try {
    const { bytes: membership, stanzas } = signedMembership(
      m.containerId,
      m.epoch + 1,
      newKey,
      members,
      ownerSecret.ed25519,
    );
    const w = write ? write(stanzas) : nextWrite(l.file, stanzas, owner.ed25519);
    const file = assembleFile(membership, stanzas.length, w, newKey, entries, ownerSecret.ed25519);
    commitRevision(dir, l.path, l.bytes, file, {
      ...l.record,
      owner: { x25519: owner.x25519, ed25519: owner.ed25519 },
    });
    return w;
  } finally {
    wipeEntries(entries);
    wipe(newKey);
  }
}
