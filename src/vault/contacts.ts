/**
 * Contacts: people whose public keys the owner has verified by fingerprint.
 * All of them live in one file, encrypted and authenticated with the vault key:
 *
 *   0   8  magic "STASHCN\0"
 *   8   2  format version, u16 LE = 1
 *   10  16 vault id
 *   26  24 nonce
 *   50  .. XChaCha20-Poly1305 ciphertext of a JSON list, with 16-byte tag; AD = bytes 0..49
 *
 * Swapping a contact's key on disk therefore needs the vault key. (Replacing the
 * whole file with an older copy of itself is not detected: see docs/vault.md.)
 */
import { NONCE_BYTES, open, sealWithNonce, TAG_BYTES } from './aead.js';
import { VaultError } from './errors.js';
import { fingerprintOf, formatFingerprint } from './fingerprint.js';
import { atomicWrite, readBounded } from './fs-atomic.js';
import { withVaultLock } from './lock.js';
import { requireVaultKey } from './meta-file.js';
import { vaultPaths } from './paths.js';
import { publicKeysProblem, type PublicKeys } from './public-key.js';
import { randomBytes, wipe } from './secure.js';

const MAGIC = Buffer.from('STASHCN\0', 'latin1');
const VERSION = 1;
const HEADER_BYTES = 8 + 2 + 16 + 24;
const MAX_FILE_BYTES = 4 * 1024 * 1024;
export const MAX_CONTACTS = 2000;

export interface Contact {
  name: string;
  email: string;
  x25519: Buffer;
  ed25519: Buffer;
  /** Formatted fingerprint, "XXXX-XXXX-XXXX-XXXX-XXXX-XXXX". */
  fingerprint: string;
  fingerprintBytes: Buffer;
  /** ISO 8601 time the contact was added. */
  addedAt: string;
  /** Keys this contact had before, each replaced through a signed rotation statement, oldest first. */
  rotatedFrom: RotatedKey[];
}

/** A contact's former key and the statement that replaced it (docs/vault.md, "Identity rotation"). */
export interface RotatedKey {
  x25519: Buffer;
  ed25519: Buffer;
  fingerprint: string;
  /** BLAKE2b-256 (hex) of the statement accepted, to tell a second, different statement of this key apart. */
  statementHash: string;
  /** ISO 8601 time the statement was accepted. */
  acceptedAt: string;
}

export interface NewContact {
  name: string;
  email: string;
  x25519: Buffer;
  ed25519: Buffer;
}

// Control characters and invisible format characters (including bidi overrides
// such as U+202E) are refused in names: they could make one contact display as
// another in a terminal.
const UNSAFE_TEXT = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}]/u;

/** The canonical stored form of a contact name, or INVALID_CONTACT. */
export function normalizeContactName(name: unknown): string {
  if (typeof name !== 'string') throw new VaultError('INVALID_CONTACT', 'a contact name must be text');
  const n = name.normalize('NFC').trim();
  if (n.length === 0 || n.length > 64)
    throw new VaultError('INVALID_CONTACT', 'a contact name must be 1-64 characters');
  if (UNSAFE_TEXT.test(n))
    throw new VaultError(
      'INVALID_CONTACT',
      'a contact name must not contain control or invisible formatting characters',
    );
  return n;
}

function normalizeEmail(email: unknown): string {
  if (typeof email !== 'string') throw new VaultError('INVALID_CONTACT', 'a contact email must be text');
  const e = email.normalize('NFC').trim();
  if (e.length > 254 || UNSAFE_TEXT.test(e) || !/^[^\s@]+@[^\s@]+$/u.test(e)) {
    throw new VaultError('INVALID_CONTACT', `${JSON.stringify(e.slice(0, 80))} is not an email address`);
  }
  return e;
}

/** Names match case-insensitively, so "Alice" and "alice" cannot both exist. */
const nameKey = (name: string): string => name.normalize('NFC').trim().toLowerCase();

function header(vaultId: Buffer, nonce: Buffer): Buffer {
  const h = Buffer.alloc(HEADER_BYTES);
  MAGIC.copy(h, 0);
  h.writeUInt16LE(VERSION, 8);
  vaultId.copy(h, 10);
  nonce.copy(h, 26);
  return h;
}

function toStored(c: Contact) {
  const base = {
    name: c.name,
    email: c.email,
    x25519: c.x25519.toString('hex'),
    ed25519: c.ed25519.toString('hex'),
    fingerprint: c.fingerprint,
    addedAt: c.addedAt,
  };
  if (c.rotatedFrom.length === 0) return base;
  const rotatedFrom = c.rotatedFrom.map((r) => ({
    x25519: r.x25519.toString('hex'),
    ed25519: r.ed25519.toString('hex'),
    statementHash: r.statementHash,
    acceptedAt: r.acceptedAt,
  }));
  return { ...base, rotatedFrom };
}

const hex32 = (h: unknown) => (typeof h === 'string' && /^[0-9a-f]{64}$/.test(h) ? Buffer.from(h, 'hex') : null);

function rotatedFromStored(v: unknown, bad: (why: string) => VaultError): RotatedKey[] {
  if (v === undefined) return [];
  if (!Array.isArray(v)) throw bad("a contact's rotatedFrom is not a list");
  return v.map((r: Record<string, unknown>) => {
    const x25519 = hex32(r?.x25519);
    const ed25519 = hex32(r?.ed25519);
    if (
      !x25519 ||
      !ed25519 ||
      typeof r.statementHash !== 'string' ||
      !/^[0-9a-f]{64}$/.test(r.statementHash) ||
      typeof r.acceptedAt !== 'string'
    ) {
      throw bad('a former key of a contact has missing or malformed fields');
    }
    return {
      x25519,
      ed25519,
      fingerprint: formatFingerprint(fingerprintOf(x25519, ed25519)),
      statementHash: r.statementHash,
      acceptedAt: r.acceptedAt,
    };
  });
}

function fromStored(v: unknown, bad: (why: string) => VaultError): Contact {
  const o = v as Record<string, unknown>;
  if (typeof o !== 'object' || o === null) throw bad('a contact record is not an object');
  const x25519 = hex32(o.x25519);
  const ed25519 = hex32(o.ed25519);
  if (
    !x25519 ||
    !ed25519 ||
    typeof o.name !== 'string' ||
    typeof o.email !== 'string' ||
    typeof o.addedAt !== 'string'
  ) {
    throw bad('a contact record has missing or malformed fields');
  }
  const fingerprintBytes = fingerprintOf(x25519, ed25519);
  const fingerprint = formatFingerprint(fingerprintBytes);
  if (o.fingerprint !== fingerprint)
    throw bad(`the stored fingerprint of ${JSON.stringify(o.name)} does not match its keys`);
  return {
    name: o.name,
    email: o.email,
    x25519,
    ed25519,
    fingerprint,
    fingerprintBytes,
    addedAt: o.addedAt,
    rotatedFrom: rotatedFromStored(o.rotatedFrom, bad),
  };
}

/** Writes the contact list (under the vault lock, by the caller or initVault). */
export function writeContacts(dir: string, vaultId: Buffer, vaultKey: Buffer, contacts: readonly Contact[]): void {
  const plain = Buffer.from(JSON.stringify({ contacts: contacts.map(toStored) }), 'utf8');
  // The nonce is part of the header, and the whole header is the AD.
  const h = header(vaultId, randomBytes(NONCE_BYTES));
  const ciphertext = sealWithNonce(plain, h, h.subarray(26, HEADER_BYTES), vaultKey);
  atomicWrite(vaultPaths(dir).contacts, [h, ciphertext]);
}

/** Reads and decrypts the contact list; VAULT_CORRUPT on any change or damage. */
function readContacts(dir: string, vaultId: Buffer, vaultKey: Buffer): Contact[] {
  const path = vaultPaths(dir).contacts;
  const bad = (why: string) => new VaultError('VAULT_CORRUPT', `${path} was modified or damaged: ${why}`);
  const bytes = readBounded(path, MAX_FILE_BYTES, () => bad('not a regular file of a plausible size'));
  if (bytes === null)
    throw new VaultError('VAULT_CORRUPT', `${path} is missing (every vault has one, even with no contacts)`);
  if (bytes.length < HEADER_BYTES + TAG_BYTES) throw bad('the file is truncated');
  if (!bytes.subarray(0, 8).equals(MAGIC)) throw bad('not a stash contacts file');
  if (bytes.readUInt16LE(8) !== VERSION) throw bad(`unsupported format version ${bytes.readUInt16LE(8)}`);
  if (!bytes.subarray(10, 26).equals(vaultId)) throw bad('it belongs to a different vault');
  const h = bytes.subarray(0, HEADER_BYTES);
  const plain = open(bytes.subarray(HEADER_BYTES), h, bytes.subarray(26, HEADER_BYTES), vaultKey);
  if (plain === null) throw bad('authentication failed');
  let doc: unknown;
  try {
    doc = JSON.parse(plain.toString('utf8'));
  } catch {
    throw bad('the decrypted list is not valid JSON');
  } finally {
    wipe(plain);
  }
  if (typeof doc !== 'object' || doc === null) throw bad('the decrypted list is not an object');
  const list = (doc as { contacts?: unknown }).contacts;
  if (!Array.isArray(list)) throw bad('the decrypted list has no contacts array');
  return list.map((v) => fromStored(v, bad));
}

/** Every contact, in the order they were added. */
export function listContacts(dir: string, vaultKey: Buffer): Contact[] {
  const meta = requireVaultKey(dir, vaultKey);
  return readContacts(dir, meta.vaultId, vaultKey);
}

/** The contact called `name` (case-insensitive); CONTACT_NOT_FOUND otherwise. */
export function getContact(dir: string, vaultKey: Buffer, name: string): Contact {
  const key = nameKey(normalizeContactName(name));
  const found = listContacts(dir, vaultKey).find((c) => nameKey(c.name) === key);
  if (!found) throw new VaultError('CONTACT_NOT_FOUND', `no contact named ${JSON.stringify(name)}`);
  return found;
}

/**
 * KEY_RETIRED when `key` (either half) is one that a contact retired by a
 * rotation this vault accepted: a retired key may be in someone else's hands
 * (often why it was retired), so it is never trusted again, as a new contact
 * or as the new key of a statement. Null when it was never retired.
 */
export function retiredKeyError(contacts: readonly Contact[], key: PublicKeys): VaultError | null {
  for (const c of contacts) {
    const r = c.rotatedFrom.find((x) => x.ed25519.equals(key.ed25519) || x.x25519.equals(key.x25519));
    if (r) {
      return new VaultError(
        'KEY_RETIRED',
        `the key ${formatFingerprint(fingerprintOf(key.x25519, key.ed25519))} is (or shares half of) a key retired by contact ` +
          `${JSON.stringify(c.name)} on ${r.acceptedAt.slice(0, 10)} (they rotated from ${r.fingerprint} to a new key); ` +
          'a retired key may be in the wrong hands and is not trusted again. Nothing was changed',
      );
    }
  }
  return null;
}

/**
 * Adds a contact whose keys the caller has already checked against a
 * fingerprint obtained out of band. CONTACT_EXISTS when the name (in any case)
 * or the same keys are already saved, KEY_RETIRED when a contact retired them.
 */
export function addContact(dir: string, vaultKey: Buffer, c: NewContact): Contact {
  const name = normalizeContactName(c.name);
  const email = normalizeEmail(c.email);
  const problem = publicKeysProblem(c);
  if (problem) throw new VaultError('BAD_PUBLIC_KEY', `cannot add ${JSON.stringify(name)}: ${problem}`);
  const meta = requireVaultKey(dir, vaultKey);
  return withVaultLock(dir, () => {
    const contacts = readContacts(dir, meta.vaultId, vaultKey);
    if (contacts.length >= MAX_CONTACTS)
      throw new VaultError('INVALID_CONTACT', `the vault already holds ${MAX_CONTACTS} contacts`);
    const fingerprintBytes = fingerprintOf(Buffer.from(c.x25519), Buffer.from(c.ed25519));
    for (const old of contacts) {
      if (nameKey(old.name) === nameKey(name))
        throw new VaultError('CONTACT_EXISTS', `a contact named ${JSON.stringify(old.name)} already exists`);
      if (old.fingerprintBytes.equals(fingerprintBytes)) {
        throw new VaultError('CONTACT_EXISTS', `this key is already saved as contact ${JSON.stringify(old.name)}`);
      }
    }
    const retired = retiredKeyError(contacts, c);
    if (retired) throw retired;
    const added: Contact = {
      name,
      email,
      x25519: Buffer.from(c.x25519),
      ed25519: Buffer.from(c.ed25519),
      fingerprint: formatFingerprint(fingerprintBytes),
      fingerprintBytes,
      addedAt: new Date().toISOString(),
      rotatedFrom: [],
    };
    writeContacts(dir, meta.vaultId, vaultKey, [...contacts, added]);
    return added;
  });
}

/** Removes the contact called `name` (case-insensitive); false when there was none. */
export function removeContact(dir: string, vaultKey: Buffer, name: string): boolean {
  const key = nameKey(normalizeContactName(name));
  const meta = requireVaultKey(dir, vaultKey);
  return withVaultLock(dir, () => {
    const contacts = readContacts(dir, meta.vaultId, vaultKey);
    const kept = contacts.filter((c) => nameKey(c.name) !== key);
    if (kept.length === contacts.length) return false;
    writeContacts(dir, meta.vaultId, vaultKey, kept);
    return true;
  });
}

/**
 * Reads the contact list under the vault lock and writes what `change`
 * returns (null: nothing to write). For changes that must see the list and
 * write it in one step, such as accepting a rotation statement.
 */
export function updateContacts<T>(
  dir: string,
  vaultKey: Buffer,
  change: (contacts: Contact[]) => { contacts: Contact[] | null; result: T },
): T {
  const meta = requireVaultKey(dir, vaultKey);
  return withVaultLock(dir, () => {
    const { contacts, result } = change(readContacts(dir, meta.vaultId, vaultKey));
    if (contacts) writeContacts(dir, meta.vaultId, vaultKey, contacts);
    return result;
  });
}
