/**
 * Reading and writing the entries of a shared container: the content key
 * from this vault's sealed stanza, entries with a content key (from the agent
 * or just opened), and a write as a new signed revision.
 */
import { open } from '../aead.js';
import { changeTime, decodeBody, historyOf, wipeEntries, type Entries } from '../container-body.js';
import { applyChanges, checkPolicy, DEFAULT_POLICY, type HistoryPolicy } from '../entry-history.js';
import { keyCommitment } from '../container-format.js';
import { VaultError } from '../errors.js';
import { identityPublic, type IdentitySecret } from '../identity.js';
import { withVaultLock } from '../lock.js';
import { validateStoredKey } from '../entry-path.js';
import { type ContainerRef, refName, validateValue } from '../names.js';
import { assertKey, constantTimeEqual, wipe } from '../secure.js';
import { ed25519PublicOf, openSealedKey } from './crypto.js';
import { MAX_DATE_MS } from './format.js';
import { assembleFile, commitRevision, nextWrite, withWriteLock } from './revisions.js';
import { loadVerified, recipientIndex, type LoadedShared, type PublicIdentity } from './verify.js';

function corrupt(path: string, why: string): VaultError {
  return new VaultError('CONTAINER_CORRUPT', `${path} is damaged or was modified: ${why}`);
}

/** This vault's public keys, as identity.json has them. */
export function myIdentity(dir: string): PublicIdentity {
  const p = identityPublic(dir);
  return { x25519: p.x25519, ed25519: p.ed25519 };
}

/** Opens this identity's stanza of a verified file; the key is checked against the commitment. */
export function openStanza(l: LoadedShared, me: PublicIdentity, x25519Secret: Buffer): Buffer {
  const i = recipientIndex(l, me);
  const m = l.file.membership;
  const key = openSealedKey(m.stanzas[i]!.sealedKey, me.x25519, x25519Secret);
  if (key === null) throw corrupt(l.path, 'the content key sealed to you does not open with your identity key');
  if (!constantTimeEqual(keyCommitment(key, m.containerId), m.commitment)) {
    wipe(key);
    throw corrupt(l.path, 'the content key sealed to you does not match the key commitment');
  }
  return key;
}

/** Decrypts the body of a verified file; CONTENT_KEY_MISMATCH for a key of another container or an older key. */
export function openSharedBody(l: LoadedShared, contentKey: Buffer): Entries {
  assertKey(contentKey, 'the content key');
  const m = l.file.membership;
  if (!constantTimeEqual(keyCommitment(contentKey, m.containerId), m.commitment)) {
    throw new VaultError(
      'CONTENT_KEY_MISMATCH',
      `the content key does not open ${l.path} (a stale cached key, or the key was rotated); open it again with your identity key`,
    );
  }
  const plain = open(l.file.body, l.file.headerBytes, l.file.write.bodyNonce, contentKey);
  if (plain === null) throw corrupt(l.path, 'the encrypted body failed authentication');
  let entries: Entries;
  try {
    entries = decodeBody(plain, l.path);
  } catch (err) {
    wipe(plain);
    throw err;
  }
  // Any member writes the change times, and every reader shows them as dates:
  // a time no Date can hold is damage, not a clock (version 1 allows up to 2^53-1).
  for (const entryName of entries.keys()) {
    if (changeTime(entries, entryName) > MAX_DATE_MS) {
      wipeEntries(entries);
      throw corrupt(l.path, `the change time of ${entryName} is out of range`);
    }
  }
  for (const [entryName, versions] of historyOf(entries)) {
    if (versions.some((v) => v.changedAt > MAX_DATE_MS || v.replacedAt > MAX_DATE_MS)) {
      wipeEntries(entries);
      throw corrupt(l.path, `a time in the history of ${entryName} is out of range`);
    }
  }
  return entries;
}

/**
 * The content key of shared container `name`, opened with this vault's
 * identity secret key (release it with wipe()). The file is verified first.
 */
export function openSharedContentKey(dir: string, ref: ContainerRef, secret: IdentitySecret): Buffer {
  const me = myIdentity(dir);
  return openStanza(loadVerified(dir, ref, me), me, secret.x25519);
}

/** Every entry of a shared container (release with wipeEntries()), after verifying the file. */
export function readSharedEntries(dir: string, ref: ContainerRef, contentKey: Buffer): Entries {
  const me = myIdentity(dir);
  const l = loadVerified(dir, ref, me);
  recipientIndex(l, me);
  return openSharedBody(l, contentKey);
}

/**
 * Applies changes (a Buffer sets, null deletes) as one new revision signed by
 * `signer` (this vault's identity), the replaced values kept in the entries'
 * history as `policy` says. Returns the names that changed; nothing is
 * written when none did.
 */
export function updateSharedEntries(
  dir: string,
  ref: ContainerRef,
  contentKey: Buffer,
  changes: ReadonlyMap<string, Buffer | null>,
  signer: IdentitySecret,
  policy: HistoryPolicy = DEFAULT_POLICY,
): string[] {
  checkPolicy(policy);
  for (const [entryName, value] of changes) {
    validateStoredKey(entryName);
    if (value !== null) validateValue(value, entryName);
  }
  assertKey(contentKey, 'the content key');
  const me = myIdentity(dir);
  if (!ed25519PublicOf(signer.ed25519).equals(me.ed25519))
    throw new VaultError('INVALID_ARGUMENT', "the signing key is not this vault's identity");
  const name = refName(ref);
  return withVaultLock(dir, () =>
    withWriteLock(dir, { name }, () => {
      const l = loadVerified(dir, { name }, me);
      recipientIndex(l, me);
      const entries = openSharedBody(l, contentKey);
      try {
        const { next, changed } = applyChanges(entries, changes, policy);
        if (changed.length === 0) return changed;
        const m = l.file.membership;
        const membership = l.file.membershipBytes.length + l.file.ownerSignature.length;
        const write = nextWrite(l.file, m.stanzas, me.ed25519);
        const bytes = assembleFile(
          l.bytes.subarray(0, membership),
          m.stanzas.length,
          write,
          contentKey,
          next,
          signer.ed25519,
        );
        commitRevision(dir, l.path, l.bytes, bytes, l.record);
        return changed;
      } finally {
        wipeEntries(entries);
      }
    }),
  );
}
