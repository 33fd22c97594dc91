/**
 * Accepting a contact's rotation statement (docs/vault.md, "Identity
 * rotation"): the contact whose current key signed it takes the new key, the
 * shared containers it owns are pinned to the new key, and the containers
 * this vault owns are re-sealed with the new key in place of the old.
 */
import { errorMessage } from '../../errors.js';
import { retiredKeyError, updateContacts, type Contact } from '../contacts.js';
import { VaultError } from '../errors.js';
import { fingerprintOf, formatFingerprint } from '../fingerprint.js';
import { identityPublic, identitySecret, wipeKeyPairs } from '../identity.js';
import { withVaultLock } from '../lock.js';
import { listRecords, writeRecord } from '../sharing/records.js';
import { resealContainer } from '../sharing/reseal.js';
import type { PublicIdentity } from '../sharing/verify.js';
import { statementHash, type RotationStatement } from './statement.js';

export interface AcceptResult {
  contact: Contact;
  /** The contact's key before (the statement's old key). */
  old: PublicIdentity;
  /** True when this statement had been accepted before: nothing about the contact changed. */
  already: boolean;
  /** Shared containers the contact owns, now pinned to the new key. */
  repinned: string[];
  /** Containers this vault owns, re-sealed with the new key in place of the old. */
  resealed: Array<{ name: string; revision: number }>;
  failed: Array<{ name: string; error: string }>;
}

const same = (a: PublicIdentity, b: PublicIdentity) => a.ed25519.equals(b.ed25519) && a.x25519.equals(b.x25519);
const fp = (k: PublicIdentity) => formatFingerprint(fingerprintOf(k.x25519, k.ed25519));

/** The contact change, or the refusal: nothing is written when this throws. */
function takeContact(dir: string, vaultKey: Buffer, s: RotationStatement): { contact: Contact; already: boolean } {
  const hash = statementHash(s);
  return updateContacts<{ contact: Contact; already: boolean }>(dir, vaultKey, (contacts) => {
    const rotated = contacts.find((c) => c.rotatedFrom.some((r) => same(r, s.old)));
    if (rotated) {
      const r = rotated.rotatedFrom.find((x) => same(x, s.old))!;
      if (r.statementHash === hash) return { contacts: null, result: { contact: rotated, already: true } };
      throw new VaultError(
        'ROTATION_CONFLICT',
        `${rotated.name} already rotated from ${fp(s.old)} to another key (accepted ${r.acceptedAt}); two different statements signed by one key mean ` +
          "that key is in someone else's hands. Nothing was changed. Check the fingerprint of their current key by phone: " +
          `stash vault contact remove ${JSON.stringify(rotated.name)}, then stash vault contact receive CODE`,
      );
    }
    const i = contacts.findIndex((c) => same(c, s.old));
    if (i < 0) {
      throw new VaultError(
        'ROTATION_UNKNOWN_KEY',
        `the statement is signed by ${fp(s.old)}, which is not the key of any of your contacts; only a key you checked by fingerprint can vouch ` +
          'for a new one. Receive the new key with a fingerprint check: stash vault contact receive CODE',
      );
    }
    const other = contacts.find((c) => c.ed25519.equals(s.new.ed25519) || c.x25519.equals(s.new.x25519));
    if (other)
      throw new VaultError(
        'CONTACT_EXISTS',
        `the new key ${fp(s.new)} is already saved as contact ${JSON.stringify(other.name)}; nothing was changed`,
      );
    const retired = retiredKeyError(contacts, s.new);
    if (retired) throw retired;
    const was = contacts[i]!;
    const fingerprintBytes = fingerprintOf(s.new.x25519, s.new.ed25519);
    const contact: Contact = {
      ...was,
      x25519: s.new.x25519,
      ed25519: s.new.ed25519,
      fingerprint: formatFingerprint(fingerprintBytes),
      fingerprintBytes,
      rotatedFrom: [
        ...was.rotatedFrom,
        {
          x25519: was.x25519,
          ed25519: was.ed25519,
          fingerprint: was.fingerprint,
          statementHash: hash,
          acceptedAt: new Date().toISOString(),
        },
      ],
    };
    const next = [...contacts];
    next[i] = contact;
    return { contacts: next, result: { contact, already: false } };
  });
}

/**
 * Accepts `s` (already decoded and verified) in the vault at `dir`. Refused
 * (before anything is written) when its old key is no contact's current key
 * (ROTATION_UNKNOWN_KEY), or is a contact's former key that rotated to another
 * key (ROTATION_CONFLICT), or when its new key is one a contact retired (KEY_RETIRED).
 */
export function acceptRotation(dir: string, vaultKey: Buffer, s: RotationStatement): AcceptResult {
  const { contact, already } = takeContact(dir, vaultKey, s);
  const result: AcceptResult = { contact, old: s.old, already, repinned: [], resealed: [], failed: [] };
  // Done again for a statement accepted before: a crash may have come between the contact and the records.
  withVaultLock(dir, () => {
    for (const { record } of listRecords(dir)) {
      if (record && same(record.owner, s.old)) {
        writeRecord(dir, { ...record, owner: { x25519: s.new.x25519, ed25519: s.new.ed25519 } });
        result.repinned.push(record.name);
      }
    }
  });
  const pub = identityPublic(dir, vaultKey);
  const me = { x25519: pub.x25519, ed25519: pub.ed25519, secret: identitySecret(dir, vaultKey) };
  try {
    for (const { name, record } of listRecords(dir)) {
      if (!record || !same(record.owner, me)) continue;
      try {
        const done = resealContainer(dir, name, {
          as: me,
          asSecret: me.secret,
          owner: me,
          ownerSecret: me.secret,
          replace: [{ from: s.old, to: s.new }],
        });
        if (done) result.resealed.push({ name, revision: done.revision });
      } catch (err) {
        if (!(err instanceof VaultError)) throw err;
        result.failed.push({ name, error: errorMessage(err) });
      }
    }
  } finally {
    wipeKeyPairs(me);
  }
  return result;
}
