/**
 * The vault owner's identity: an X25519 key pair (to receive encrypted shares)
 * and an Ed25519 key pair (to sign). identity.json holds the public keys in the
 * clear, so `stash vault identity` can show the fingerprint without a password,
 * and the 96 secret-key bytes encrypted with the vault key. The associated data
 * binds the vault id and both public keys, so the public half cannot be swapped
 * without identitySecret() (and identityPublic() given a key) noticing.
 */
import { open, seal } from './aead.js';
import { VaultError } from './errors.js';
import { fingerprintOf, formatFingerprint } from './fingerprint.js';
import { atomicWrite, readBounded } from './fs-atomic.js';
import { loadMeta, requireVaultKey } from './meta-file.js';
import { vaultPaths } from './paths.js';
import { publicKeysProblem } from './public-key.js';
import { constantTimeEqual, secureAlloc, secureCopy, wipe } from './secure.js';
import { sodium } from './sodium.js';

export const IDENTITY_FORMAT = 'stash-identity';
const VERSION = 1;
const SECRET_BYTES = 32 + 64;
const AD_DOMAIN = Buffer.from('stash-identity\0', 'latin1');
const RETIRING_DOMAIN = Buffer.from('stash-identity-retiring\0', 'latin1');
const MAX_ROTATIONS = 256;

export interface IdentityPublic {
  x25519: Buffer;
  ed25519: Buffer;
  /** Formatted for people: "XXXX-XXXX-XXXX-XXXX-XXXX-XXXX". */
  fingerprint: string;
  fingerprintBytes: Buffer;
}

/** Secret keys, each in its own secure buffer; release both with wipe(). */
export interface IdentitySecret {
  /** X25519 secret key, 32 bytes. */
  x25519: Buffer;
  /** Ed25519 secret key in libsodium's 64-byte form (seed || public key). */
  ed25519: Buffer;
}

interface IdentityFile {
  vaultId: Buffer;
  createdAt: string;
  x25519: Buffer;
  ed25519: Buffer;
  nonce: Buffer;
  wrapped: Buffer;
  rotations: string[];
  retiring: { x25519: Buffer; ed25519: Buffer; nonce: Buffer; wrapped: Buffer } | null;
}

function ad(vaultId: Buffer, x25519: Buffer, ed25519: Buffer): Buffer {
  const version = Buffer.alloc(2);
  version.writeUInt16LE(VERSION);
  return Buffer.concat([AD_DOMAIN, version, vaultId, x25519, ed25519]);
}

function publicOf(x25519: Buffer, ed25519: Buffer): IdentityPublic {
  const fingerprintBytes = fingerprintOf(x25519, ed25519);
  return { x25519, ed25519, fingerprint: formatFingerprint(fingerprintBytes), fingerprintBytes };
}

/** A public identity with its secret keys (release them with wipeKeyPairs). */
export interface KeyPairs {
  x25519: Buffer;
  ed25519: Buffer;
  secret: IdentitySecret;
}

/** A new X25519 and Ed25519 key pair, the secret keys in secure buffers. */
export function generateKeyPairs(): KeyPairs {
  const s = sodium();
  const x25519 = Buffer.alloc(32);
  const ed25519 = Buffer.alloc(32);
  const secret = { x25519: secureAlloc(32), ed25519: secureAlloc(64) };
  s.crypto_box_keypair(x25519, secret.x25519);
  s.crypto_sign_keypair(ed25519, secret.ed25519);
  return { x25519, ed25519, secret };
}

/** Zeroes and frees the secret keys of `k` (null: nothing). */
export function wipeKeyPairs(k: { secret: IdentitySecret } | null): void {
  if (!k) return;
  wipe(k.secret.x25519);
  wipe(k.secret.ed25519);
}

/** The 96 secret bytes as stored: X25519 then Ed25519, in a secure buffer the caller wipes. */
function joined(secret: IdentitySecret): Buffer {
  const b = secureAlloc(SECRET_BYTES);
  secret.x25519.copy(b, 0);
  secret.ed25519.copy(b, 32);
  return b;
}

function sealSecret(secret: IdentitySecret, adBytes: Buffer, vaultKey: Buffer): { nonce: Buffer; ciphertext: Buffer } {
  const plain = joined(secret);
  try {
    return seal(plain, adBytes, vaultKey);
  } finally {
    wipe(plain);
  }
}

/** What identity.json holds besides the current keys (identity rotation, docs/vault.md). */
export interface IdentityExtras {
  /** Every rotation statement that led to the current keys, oldest first, in text form. */
  rotations: string[];
  /** The previous key pairs while a rotation is being finished: public keys and the 96 secret bytes. */
  retiring: KeyPairs | null;
}

function retiringAd(vaultId: Buffer, x25519: Buffer, ed25519: Buffer): Buffer {
  return Buffer.concat([RETIRING_DOMAIN, ad(vaultId, x25519, ed25519).subarray(AD_DOMAIN.length)]);
}

/**
 * Writes identity.json: the keys with their secret keys wrapped by the vault
 * key, and the rotation extras. The caller holds the vault lock
 * (or is initVault).
 */
export function writeIdentity(
  dir: string,
  vaultId: Buffer,
  vaultKey: Buffer,
  keys: KeyPairs,
  extras: IdentityExtras = { rotations: [], retiring: null },
): IdentityPublic {
  const pub = keys;
  const { nonce, ciphertext } = sealSecret(keys.secret, ad(vaultId, pub.x25519, pub.ed25519), vaultKey);
  const out = publicOf(pub.x25519, pub.ed25519);
  const doc: Record<string, unknown> = {
    format: IDENTITY_FORMAT,
    formatVersion: VERSION,
    vaultId: vaultId.toString('hex'),
    createdAt: new Date().toISOString(),
    x25519: pub.x25519.toString('hex'),
    ed25519: pub.ed25519.toString('hex'),
    fingerprint: out.fingerprint,
    secret: { alg: 'xchacha20poly1305-ietf', nonce: nonce.toString('hex'), wrapped: ciphertext.toString('hex') },
  };
  if (extras.rotations.length > 0) doc.rotations = extras.rotations;
  if (extras.retiring) {
    const r = extras.retiring;
    const w = sealSecret(r.secret, retiringAd(vaultId, r.x25519, r.ed25519), vaultKey);
    doc.retiring = {
      x25519: r.x25519.toString('hex'),
      ed25519: r.ed25519.toString('hex'),
      nonce: w.nonce.toString('hex'),
      wrapped: w.ciphertext.toString('hex'),
    };
  }
  atomicWrite(vaultPaths(dir).identity, [Buffer.from(`${JSON.stringify(doc, null, 2)}\n`)]);
  return out;
}

/**
 * Generates a new identity for the vault and writes identity.json. Called by
 * initVault; the vault key must already be generated (and is not checked here
 * because vault.json does not exist yet).
 */
export function createIdentity(dir: string, vaultId: Buffer, vaultKey: Buffer): IdentityPublic {
  const pair = generateKeyPairs();
  try {
    return writeIdentity(dir, vaultId, vaultKey, pair);
  } finally {
    wipeKeyPairs(pair);
  }
}

function loadIdentityFile(dir: string, expectedVaultId: Buffer): IdentityFile {
  const path = vaultPaths(dir).identity;
  const bad = (why: string) => new VaultError('VAULT_CORRUPT', `${path} is damaged: ${why}`);
  const bytes = readBounded(path, 256 * 1024, () => bad('not a small regular file'));
  if (bytes === null) throw new VaultError('VAULT_CORRUPT', `${path} is missing; the vault has no identity`);
  let d: Record<string, unknown>;
  try {
    d = JSON.parse(bytes.toString('utf8')) as Record<string, unknown>;
  } catch {
    throw bad('not valid JSON');
  }
  if (typeof d !== 'object' || d === null || d.format !== IDENTITY_FORMAT) throw bad('not a stash identity file');
  if (d.formatVersion !== VERSION) throw bad(`unsupported format version ${JSON.stringify(d.formatVersion)}`);
  const hex = (v: unknown, n: number, what: string): Buffer => {
    if (typeof v !== 'string' || v.length !== n * 2 || !/^[0-9a-f]+$/.test(v))
      throw bad(`${what} is not ${n} bytes of hex`);
    return Buffer.from(v, 'hex');
  };
  const secret = d.secret as Record<string, unknown> | null;
  if (typeof secret !== 'object' || secret === null) throw bad('secret is missing');
  const f: IdentityFile = {
    vaultId: hex(d.vaultId, 16, 'vaultId'),
    createdAt: typeof d.createdAt === 'string' ? d.createdAt : '',
    x25519: hex(d.x25519, 32, 'x25519'),
    ed25519: hex(d.ed25519, 32, 'ed25519'),
    nonce: hex(secret.nonce, 24, 'secret.nonce'),
    wrapped: hex(secret.wrapped, SECRET_BYTES + 16, 'secret.wrapped'),
    rotations: [],
    retiring: null,
  };
  if (d.rotations !== undefined) {
    if (
      !Array.isArray(d.rotations) ||
      d.rotations.length > MAX_ROTATIONS ||
      !d.rotations.every((r) => typeof r === 'string' && r.length <= 1024)
    ) {
      throw bad('rotations is not a list of statements');
    }
    f.rotations = d.rotations as string[];
  }
  if (d.retiring !== undefined) {
    const r = d.retiring as Record<string, unknown> | null;
    if (typeof r !== 'object' || r === null) throw bad('retiring is not an object');
    f.retiring = {
      x25519: hex(r.x25519, 32, 'retiring.x25519'),
      ed25519: hex(r.ed25519, 32, 'retiring.ed25519'),
      nonce: hex(r.nonce, 24, 'retiring.nonce'),
      wrapped: hex(r.wrapped, SECRET_BYTES + 16, 'retiring.wrapped'),
    };
  }
  if (!f.vaultId.equals(expectedVaultId)) throw bad('it belongs to a different vault');
  const problem = publicKeysProblem(f);
  if (problem) throw bad(problem);
  if (d.fingerprint !== formatFingerprint(fingerprintOf(f.x25519, f.ed25519)))
    throw bad('the fingerprint does not match the keys');
  return f;
}

/** Decrypts the secret keys and checks that they belong to the public keys. */
function openSecret(dir: string, f: IdentityFile, vaultKey: Buffer): IdentitySecret {
  const path = vaultPaths(dir).identity;
  const plain = open(f.wrapped, ad(f.vaultId, f.x25519, f.ed25519), f.nonce, vaultKey);
  if (plain === null)
    throw new VaultError('VAULT_CORRUPT', `${path} was modified or damaged: its secret keys do not decrypt`);
  return checkedSecret(path, plain, f);
}

/** Splits 96 decrypted bytes (wiped here) into the two secret keys, checked against `pub`. */
function checkedSecret(path: string, plain: Buffer, f: { x25519: Buffer; ed25519: Buffer }): IdentitySecret {
  const x25519 = secureCopy(plain.subarray(0, 32));
  const ed25519 = secureCopy(plain.subarray(32, SECRET_BYTES));
  wipe(plain);
  const derivedX = Buffer.alloc(32);
  const derivedEd = Buffer.alloc(32);
  sodium().crypto_scalarmult_base(derivedX, x25519);
  sodium().crypto_sign_ed25519_sk_to_pk(derivedEd, ed25519);
  if (!constantTimeEqual(derivedX, f.x25519) || !constantTimeEqual(derivedEd, f.ed25519)) {
    wipe(x25519);
    wipe(ed25519);
    throw new VaultError('VAULT_CORRUPT', `${path} is inconsistent: the secret keys do not match the public keys`);
  }
  return { x25519, ed25519 };
}

/**
 * The identity's public keys and fingerprint. Without `vaultKey` this reads
 * identity.json as it is (anyone who can write the folder could have changed
 * it); with `vaultKey` the public keys are authenticated against the encrypted
 * secret keys first. Use the key form before publishing.
 */
export function identityPublic(dir: string, vaultKey?: Buffer): IdentityPublic {
  const meta = vaultKey === undefined ? loadMeta(dir) : requireVaultKey(dir, vaultKey);
  const f = loadIdentityFile(dir, meta.vaultId);
  if (vaultKey !== undefined) {
    const secret = openSecret(dir, f, vaultKey);
    wipe(secret.x25519);
    wipe(secret.ed25519);
  }
  return publicOf(f.x25519, f.ed25519);
}

/** The identity's secret keys in secure buffers; release them with wipe() when done. */
export function identitySecret(dir: string, vaultKey: Buffer): IdentitySecret {
  const meta = requireVaultKey(dir, vaultKey);
  return openSecret(dir, loadIdentityFile(dir, meta.vaultId), vaultKey);
}

/**
 * The rotation extras of identity.json; the retiring block's secret keys are
 * decrypted and checked (release them with wipeKeyPairs).
 */
export function identityExtras(dir: string, vaultKey: Buffer): IdentityExtras {
  const meta = requireVaultKey(dir, vaultKey);
  const f = loadIdentityFile(dir, meta.vaultId);
  if (!f.retiring) return { rotations: f.rotations, retiring: null };
  const r = f.retiring;
  const path = vaultPaths(dir).identity;
  const plain = open(r.wrapped, retiringAd(f.vaultId, r.x25519, r.ed25519), r.nonce, vaultKey);
  if (plain === null)
    throw new VaultError('VAULT_CORRUPT', `${path} was modified or damaged: its retiring secret keys do not decrypt`);
  return {
    rotations: f.rotations,
    retiring: { x25519: r.x25519, ed25519: r.ed25519, secret: checkedSecret(path, plain, r) },
  };
}
