/**
 * The container file format, version 1 (see docs/container-format.md). Pure
 * encoding and decoding; no file I/O. All integers little-endian.
 *
 *   off  len  field
 *   0    8    magic "STASHCT\0"
 *   8    2    format version = 1
 *   10   16   vault id
 *   26   16   container id
 *   42   24   wrap nonce
 *   66   48   content key wrapped by the vault key (32 + 16-byte tag)
 *   114  32   key commitment = BLAKE2b-256(key = content key, "stash-content-key-commit\0" || container id)
 *   146  24   body nonce
 *   170  1    name length n (1..64)
 *   171  n    container name (ASCII)
 *   171+n 16  header checksum = BLAKE2b-128(bytes 0 .. 170+n)
 *   187+n ..  body: XChaCha20-Poly1305(content key, body nonce, AD = the whole header) with 16-byte tag
 *
 * The content key wrap has AD = magic || version || vault id || container id || n || name,
 * so a wrapped key cannot be moved to another container, vault or name.
 */
import { TAG_BYTES } from './aead.js';
import { VaultError } from './errors.js';
import { type ContainerName, validateContainerName } from './names.js';
import { blake2b } from './secure.js';

export const CONTAINER_MAGIC = Buffer.from('STASHCT\0', 'latin1');
export const CONTAINER_VERSION = 1;
const OFF = {
  version: 8,
  vaultId: 10,
  containerId: 26,
  wrapNonce: 42,
  wrapped: 66,
  commit: 114,
  bodyNonce: 146,
  nameLen: 170,
  name: 171,
} as const;
const CHECKSUM_BYTES = 16;
/** The largest possible header: fixed part, a 64-byte name, checksum. */
export const MAX_HEADER_BYTES = OFF.name + 64 + CHECKSUM_BYTES;
const COMMIT_DOMAIN = Buffer.from('stash-content-key-commit\0', 'latin1');

export interface ContainerHeader {
  version: number;
  vaultId: Buffer;
  containerId: Buffer;
  wrapNonce: Buffer;
  wrappedKey: Buffer;
  commitment: Buffer;
  bodyNonce: Buffer;
  name: string;
}

/** The result of parsing a whole file: header, its exact bytes (the body AD), the body. */
export interface ParsedContainer {
  header: ContainerHeader;
  headerBytes: Buffer;
  body: Buffer;
}

/** Binds a content key to its container, so a wrong key is recognised before decryption. */
export function keyCommitment(contentKey: Buffer, containerId: Buffer): Buffer {
  return blake2b(32, Buffer.concat([COMMIT_DOMAIN, containerId]), contentKey);
}

/** The associated data of the content-key wrap. */
export function wrapAd(h: Pick<ContainerHeader, 'version' | 'vaultId' | 'containerId' | 'name'>): Buffer {
  const name = Buffer.from(h.name, 'latin1');
  const version = Buffer.alloc(2);
  version.writeUInt16LE(h.version);
  return Buffer.concat([CONTAINER_MAGIC, version, h.vaultId, h.containerId, Buffer.from([name.length]), name]);
}

/** The header bytes, checksum included. */
export function encodeHeader(h: ContainerHeader): Buffer {
  validateContainerName(h.name);
  const name = Buffer.from(h.name, 'latin1');
  const out = Buffer.alloc(OFF.name + name.length + CHECKSUM_BYTES);
  CONTAINER_MAGIC.copy(out, 0);
  out.writeUInt16LE(h.version, OFF.version);
  h.vaultId.copy(out, OFF.vaultId);
  h.containerId.copy(out, OFF.containerId);
  h.wrapNonce.copy(out, OFF.wrapNonce);
  h.wrappedKey.copy(out, OFF.wrapped);
  h.commitment.copy(out, OFF.commit);
  h.bodyNonce.copy(out, OFF.bodyNonce);
  out.writeUInt8(name.length, OFF.nameLen);
  name.copy(out, OFF.name);
  blake2b(CHECKSUM_BYTES, out.subarray(0, OFF.name + name.length)).copy(out, OFF.name + name.length);
  return out;
}

/**
 * Parses a header from the start of `bytes` (a whole file, or its first
 * MAX_HEADER_BYTES). Every problem is CONTAINER_CORRUPT with a message that
 * names `path`. Returns the header and its length. `expected`: the name the
 * caller will require (checked when it was parsed); a stored name equal to it
 * is known to be valid, so only another name is checked here.
 */
export function decodeHeader(
  bytes: Buffer,
  path: string,
  expected: ContainerName | null = null,
): { header: ContainerHeader; length: number } {
  const bad = (why: string) => new VaultError('CONTAINER_CORRUPT', `${path} is damaged or was modified: ${why}`);
  if (bytes.length < CONTAINER_MAGIC.length || !bytes.subarray(0, 8).equals(CONTAINER_MAGIC)) {
    throw bad(bytes.length === 0 ? 'the file is empty' : 'it does not start with the stash container magic');
  }
  if (bytes.length < OFF.name) throw bad('the file is truncated inside the header');
  const version = bytes.readUInt16LE(OFF.version);
  if (version !== CONTAINER_VERSION) {
    throw bad(
      `format version ${version} is not supported (this stash reads version ${CONTAINER_VERSION}; a newer stash may have written it)`,
    );
  }
  const nameLen = bytes.readUInt8(OFF.nameLen);
  if (nameLen < 1 || nameLen > 64) throw bad(`the name length ${nameLen} is out of range`);
  const length = OFF.name + nameLen + CHECKSUM_BYTES;
  if (bytes.length < length) throw bad('the file is truncated inside the header');
  const checksum = blake2b(CHECKSUM_BYTES, bytes.subarray(0, OFF.name + nameLen));
  if (!checksum.equals(bytes.subarray(OFF.name + nameLen, length))) throw bad('the header checksum does not match');
  const name = bytes.toString('latin1', OFF.name, OFF.name + nameLen);
  try {
    if (name !== expected) validateContainerName(name);
  } catch {
    throw bad('the stored container name is invalid');
  }
  const slice = (from: number, to: number) => Buffer.from(bytes.subarray(from, to));
  return {
    length,
    header: {
      version,
      vaultId: slice(OFF.vaultId, OFF.containerId),
      containerId: slice(OFF.containerId, OFF.wrapNonce),
      wrapNonce: slice(OFF.wrapNonce, OFF.wrapped),
      wrappedKey: slice(OFF.wrapped, OFF.commit),
      commitment: slice(OFF.commit, OFF.bodyNonce),
      bodyNonce: slice(OFF.bodyNonce, OFF.nameLen),
      name,
    },
  };
}

/** Splits a whole file into header and body; the body must at least hold a tag. `expected`: as decodeHeader's. */
export function parseContainer(bytes: Buffer, path: string, expected: ContainerName | null = null): ParsedContainer {
  const { header, length } = decodeHeader(bytes, path, expected);
  const body = bytes.subarray(length);
  if (body.length < TAG_BYTES) {
    throw new VaultError(
      'CONTAINER_CORRUPT',
      `${path} is damaged or was modified: the file is truncated (no encrypted body)`,
    );
  }
  return { header, headerBytes: bytes.subarray(0, length), body };
}
