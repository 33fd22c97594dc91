/**
 * The cryptography of shared containers, each primitive from libsodium:
 *
 * - sealed content keys: crypto_box_seal (an ephemeral X25519 key pair per
 *   stanza, XSalsa20-Poly1305 under the shared secret). Anonymous by design,
 *   which is why the recipient list carries the owner's signature.
 * - signatures: Ed25519 (crypto_sign_detached), with a domain string per kind
 *   so a membership signature can never pass as a write signature.
 * - the revision hash a reader remembers: BLAKE2b-256 of the whole file.
 */
import { blake2b, secureAlloc, wipe } from '../secure.js';
import { sodium } from '../sodium.js';
import { SEALED_KEY_BYTES, SIGNATURE_BYTES } from './format.js';

const MEMBERS_DOMAIN = Buffer.from('stash-members-v2\0', 'latin1');
const WRITE_DOMAIN = Buffer.from('stash-write-v2\0', 'latin1');

/** The content key sealed to one recipient's X25519 public key (80 bytes). */
export function sealKey(contentKey: Buffer, x25519: Buffer): Buffer {
  const out = Buffer.alloc(SEALED_KEY_BYTES);
  sodium().crypto_box_seal(out, contentKey, x25519);
  return out;
}

/** Opens a sealed content key into a secure buffer, or null when it is not sealed to this key pair. */
export function openSealedKey(sealed: Buffer, x25519Public: Buffer, x25519Secret: Buffer): Buffer | null {
  const key = secureAlloc(SEALED_KEY_BYTES - 48);
  if (sodium().crypto_box_seal_open(key, sealed, x25519Public, x25519Secret)) return key;
  wipe(key);
  return null;
}

function sign(domain: Buffer, message: Buffer, ed25519Secret: Buffer): Buffer {
  const sig = Buffer.alloc(SIGNATURE_BYTES);
  sodium().crypto_sign_detached(sig, Buffer.concat([domain, message]), ed25519Secret);
  return sig;
}

function verify(domain: Buffer, message: Buffer, signature: Buffer, ed25519Public: Buffer): boolean {
  if (signature.length !== SIGNATURE_BYTES || ed25519Public.length !== 32) return false;
  return sodium().crypto_sign_verify_detached(signature, Buffer.concat([domain, message]), ed25519Public);
}

/** The owner's signature over the membership bytes. */
export function signMembership(membershipBytes: Buffer, ownerSecret: Buffer): Buffer {
  return sign(MEMBERS_DOMAIN, membershipBytes, ownerSecret);
}

export function verifyMembership(membershipBytes: Buffer, signature: Buffer, ownerPublic: Buffer): boolean {
  return verify(MEMBERS_DOMAIN, membershipBytes, signature, ownerPublic);
}

/** The writer's signature over every byte of the file before it. */
export function signWrite(signedBytes: Buffer, writerSecret: Buffer): Buffer {
  return sign(WRITE_DOMAIN, signedBytes, writerSecret);
}

export function verifyWrite(signedBytes: Buffer, signature: Buffer, writerPublic: Buffer): boolean {
  return verify(WRITE_DOMAIN, signedBytes, signature, writerPublic);
}

/** What a reader remembers of a revision: BLAKE2b-256 of the whole file. */
export function fileHash(bytes: Buffer): Buffer {
  return blake2b(32, bytes);
}

/** The Ed25519 public key of a libsodium 64-byte secret key (its last 32 bytes, re-derived). */
export function ed25519PublicOf(secret: Buffer): Buffer {
  const pk = Buffer.alloc(32);
  sodium().crypto_sign_ed25519_sk_to_pk(pk, secret);
  return pk;
}
