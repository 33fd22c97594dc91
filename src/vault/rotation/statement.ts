/**
 * The identity rotation statement (docs/vault.md, "Identity rotation"): the
 * new public keys signed by the old Ed25519 key and by the new one. 275 bytes:
 *
 *   off  size  field
 *   0    8     magic "STASHRT\0"
 *   8    1     version 0x01
 *   9    65    old public key, published form (0x01, X25519, Ed25519)
 *   74   65    new public key, same form
 *   139  8     created at, ms since 1970, u64 LE (at most 8.64e15)
 *   147  64    old key's Ed25519 signature over DOMAIN || bytes 0..146
 *   211  64    new key's Ed25519 signature over the same message
 *
 * As text: "stash-rotation-v1:" and the bytes in unpadded base64url, one line.
 * Decoding checks the canonical text form, structure, keys and both signatures; every refusal is
 * BAD_ROTATION with a message that says which part is wrong.
 */
import { VaultError } from '../errors.js';
import { decodePublicKey, encodePublicKey, PUBLIC_KEY_BYTES, type PublicKeys } from '../public-key.js';
import { blake2b } from '../secure.js';
import { sodium } from '../sodium.js';

const MAGIC = Buffer.from('STASHRT\0', 'latin1');
const VERSION = 1;
const DOMAIN = Buffer.from('stash-identity-rotation-v1\0', 'latin1');
export const TEXT_PREFIX = 'stash-rotation-v1:';
const SIG = 64;
const OFF = { version: 8, old: 9, new: 9 + PUBLIC_KEY_BYTES, createdAt: 9 + 2 * PUBLIC_KEY_BYTES } as const;
const SIGNED_BYTES = OFF.createdAt + 8;
export const STATEMENT_BYTES = SIGNED_BYTES + 2 * SIG;
const MAX_DATE_MS = 8.64e15;
/** Longer text than this is refused before it is decoded. */
const MAX_TEXT_CHARS = 4096;

export interface RotationStatement {
  old: PublicKeys;
  new: PublicKeys;
  createdAt: Date;
  /** The 275 bytes. */
  bytes: Buffer;
}

function bad(why: string): VaultError {
  return new VaultError('BAD_ROTATION', `not a valid rotation statement: ${why}`);
}

function message(signed: Buffer): Buffer {
  return Buffer.concat([DOMAIN, signed]);
}

/**
 * Makes a statement that `oldKeys` hands over to `newKeys`, signed by both
 * Ed25519 secret keys (libsodium's 64-byte form).
 */
export function makeStatement(
  oldKeys: PublicKeys,
  newKeys: PublicKeys,
  oldEdSecret: Buffer,
  newEdSecret: Buffer,
  createdAt = new Date(),
): RotationStatement {
  const signed = Buffer.alloc(SIGNED_BYTES);
  MAGIC.copy(signed, 0);
  signed.writeUInt8(VERSION, OFF.version);
  encodePublicKey(oldKeys).copy(signed, OFF.old);
  encodePublicKey(newKeys).copy(signed, OFF.new);
  signed.writeBigUInt64LE(BigInt(createdAt.getTime()), OFF.createdAt);
  const sigs = [oldEdSecret, newEdSecret].map((sk) => {
    const sig = Buffer.alloc(SIG);
    sodium().crypto_sign_detached(sig, message(signed), sk);
    return sig;
  });
  return decodeStatement(Buffer.concat([signed, ...sigs]));
}

/** Decodes and verifies the 275 bytes; BAD_ROTATION for anything else. */
export function decodeStatement(bytes: Buffer): RotationStatement {
  if (!Buffer.isBuffer(bytes)) throw bad('not bytes');
  if (bytes.length !== STATEMENT_BYTES) throw bad(`it is ${bytes.length} bytes, a statement is ${STATEMENT_BYTES}`);
  if (!bytes.subarray(0, 8).equals(MAGIC)) throw bad('it does not start with the statement magic');
  if (bytes[OFF.version] !== VERSION) throw bad(`unknown version ${bytes[OFF.version]}`);
  const key = (at: number, what: string): PublicKeys => {
    try {
      return decodePublicKey(bytes.subarray(at, at + PUBLIC_KEY_BYTES));
    } catch (err) {
      throw bad(`the ${what} key is unusable (${(err as Error).message})`);
    }
  };
  const oldKeys = key(OFF.old, 'old');
  const newKeys = key(OFF.new, 'new');
  if (oldKeys.x25519.equals(newKeys.x25519) || oldKeys.ed25519.equals(newKeys.ed25519))
    throw bad('the old and new keys are the same');
  const ms = bytes.readBigUInt64LE(OFF.createdAt);
  if (ms > BigInt(MAX_DATE_MS)) throw bad('its creation time is out of range');
  const msg = message(bytes.subarray(0, SIGNED_BYTES));
  const verify = (at: number, pk: Buffer) =>
    sodium().crypto_sign_verify_detached(bytes.subarray(at, at + SIG), msg, pk);
  if (!verify(SIGNED_BYTES, oldKeys.ed25519))
    throw bad('it is not signed by the old key it names (changed, or made by someone else)');
  if (!verify(SIGNED_BYTES + SIG, newKeys.ed25519))
    throw bad('it is not signed by the new key it names (changed, or made by someone else)');
  return { old: oldKeys, new: newKeys, createdAt: new Date(Number(ms)), bytes: Buffer.from(bytes) };
}

/** The one-line text form. */
export function statementText(s: RotationStatement): string {
  return `${TEXT_PREFIX}${s.bytes.toString('base64url')}`;
}

/** Parses the text form (white space around it allowed) and verifies it. */
export function parseStatement(text: string): RotationStatement {
  if (typeof text !== 'string') throw bad('not text');
  if (text.length > MAX_TEXT_CHARS) throw bad(`${text.length} characters is far longer than a statement`);
  const t = text.trim();
  if (!t.startsWith(TEXT_PREFIX)) throw bad(`it does not start with ${JSON.stringify(TEXT_PREFIX)}`);
  const body = t.slice(TEXT_PREFIX.length);
  if (!/^[A-Za-z0-9_-]*$/.test(body)) throw bad('it holds characters that are not base64url');
  const bytes = Buffer.from(body, 'base64url');
  // Node ignores the unused low bits of the last character: refuse them, so one statement has one text.
  if (bytes.length === STATEMENT_BYTES && bytes.toString('base64url') !== body)
    throw bad('it is not in canonical base64url (the unused low bits of its last character are set)');
  return decodeStatement(bytes);
}

/** A short hash of a statement, to tell two statements of one old key apart. */
export function statementHash(s: RotationStatement): string {
  return blake2b(32, s.bytes).toString('hex');
}
