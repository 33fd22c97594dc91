/**
 * The shared container format, version 2 (docs/container-format.md, "Shared
 * containers"). Pure encoding and decoding, no I/O, no cryptography beyond
 * what the layout needs. All integers little-endian.
 *
 *   off        size   field
 *   0          8      magic "STASHCT\0" (as version 1)
 *   8          2      format version = 2
 *   10         16     container id
 *   26         4      membership epoch (1 when first shared, +1 on every share/unshare)
 *   30         32     key commitment (as version 1)
 *   62         1      recipient count r, 1..64
 *   63         144 r  stanzas, the owner's first: X25519 pk (32), Ed25519 pk (32), sealed content key (80)
 *   S=63+144r  64     owner signature over bytes 0 .. S-1
 *   W=S+64     8      revision (1, 2, ...)
 *   W+8        8      written at, milliseconds since 1970 (the writer's clock), at most 8.64e15
 *   W+16       32     writer's Ed25519 public key
 *   W+48       8 r    last write: per stanza, the revision that member last wrote (0: never)
 *   W+48+8r    24     body nonce
 *   H=W+72+8r  ..     body: XChaCha20-Poly1305(content key, body nonce, AD = bytes 0 .. H-1)
 *   end-64     64     writer signature over every byte before it
 *
 * Age-like: recipient stanzas in a plain header, one sealed file key each; the
 * recipient list is the owner's to sign, each write the writer's.
 */
import { VaultError } from '../errors.js';
import { CONTAINER_MAGIC } from '../container-format.js';
import { MAX_BODY_BYTES } from '../names.js';

export const SHARED_VERSION = 2;
export const MAX_RECIPIENTS = 64;
export const SEALED_KEY_BYTES = 32 + 48; // crypto_box_SEALBYTES = 48
export const STANZA_BYTES = 32 + 32 + SEALED_KEY_BYTES;
export const SIGNATURE_BYTES = 64;
const NONCE_BYTES = 24;
const TAG_BYTES = 16;
/** Bytes from the start of the file up to and including the recipient count. */
const FIXED = 63;
const OFF = { version: 8, containerId: 10, epoch: 26, commit: 30, count: 62 } as const;
/** The last instant a JavaScript Date holds (+275760-09-13), in ms since 1970: the largest time a reader accepts. */
export const MAX_DATE_MS = 8.64e15;

export interface Stanza {
  x25519: Buffer;
  ed25519: Buffer;
  sealedKey: Buffer;
}

/** The owner-signed part: who may read, and the content key each of them holds. */
export interface Membership {
  containerId: Buffer;
  epoch: number;
  commitment: Buffer;
  /** The owner first. */
  stanzas: Stanza[];
}

/** The writer-signed part that changes on every write. */
export interface WriteInfo {
  revision: number;
  writtenAt: number;
  writer: Buffer;
  /** Per stanza, in stanza order: the revision that member last wrote (0: never). */
  lastWrites: number[];
  bodyNonce: Buffer;
}

export interface SharedFile {
  membership: Membership;
  write: WriteInfo;
  /** Bytes 0 .. S-1: what the owner signed. */
  membershipBytes: Buffer;
  ownerSignature: Buffer;
  /** Bytes 0 .. H-1: the body's associated data. */
  headerBytes: Buffer;
  body: Buffer;
  /** Every byte before the writer signature: what the writer signed. */
  signedBytes: Buffer;
  writerSignature: Buffer;
}

/** Header length for r recipients. */
export function headerLength(r: number): number {
  return FIXED + STANZA_BYTES * r + SIGNATURE_BYTES + 72 + 8 * r;
}

/** The largest valid file: a full header, a full padded body, its tag and the signature. */
export const MAX_SHARED_FILE_BYTES = headerLength(MAX_RECIPIENTS) + MAX_BODY_BYTES + 256 + TAG_BYTES + SIGNATURE_BYTES;

/** The format version of a file's first bytes, or null when it is not a stash container at all. */
export function containerVersion(prefix: Buffer): number | null {
  if (prefix.length < 10 || !prefix.subarray(0, 8).equals(CONTAINER_MAGIC)) return null;
  return prefix.readUInt16LE(OFF.version);
}

function corrupt(path: string, why: string): VaultError {
  return new VaultError('CONTAINER_CORRUPT', `${path} is damaged or was modified: ${why}`);
}

function u64(n: number): Buffer {
  const b = Buffer.alloc(8);
  b.writeBigUInt64LE(BigInt(n));
  return b;
}

/** The unsigned membership bytes 0 .. S-1 (the owner signs exactly these). */
export function encodeMembership(m: Membership): Buffer {
  const r = m.stanzas.length;
  if (r < 1 || r > MAX_RECIPIENTS)
    throw new VaultError('INVALID_ARGUMENT', `a shared container has 1 to ${MAX_RECIPIENTS} recipients`);
  const out = Buffer.alloc(FIXED + STANZA_BYTES * r);
  CONTAINER_MAGIC.copy(out, 0);
  out.writeUInt16LE(SHARED_VERSION, OFF.version);
  m.containerId.copy(out, OFF.containerId);
  out.writeUInt32LE(m.epoch, OFF.epoch);
  m.commitment.copy(out, OFF.commit);
  out.writeUInt8(r, OFF.count);
  m.stanzas.forEach((s, i) => {
    const o = FIXED + i * STANZA_BYTES;
    s.x25519.copy(out, o);
    s.ed25519.copy(out, o + 32);
    s.sealedKey.copy(out, o + 64);
  });
  return out;
}

/** The write block (revision .. body nonce) for a membership of `r` stanzas. */
export function encodeWrite(w: WriteInfo, r: number): Buffer {
  if (w.lastWrites.length !== r) throw new VaultError('INVALID_ARGUMENT', 'one last-write revision per recipient');
  return Buffer.concat([u64(w.revision), u64(w.writtenAt), w.writer, ...w.lastWrites.map(u64), w.bodyNonce]);
}

/**
 * Reads a u64 revision. Not refused here when it is too large to be exact in a
 * JS number: such numbers are a signed member's doing, refused after the
 * signatures with that member named (numbering.ts), so the owner can remove them.
 */
function counter(bytes: Buffer, at: number): number {
  return Number(bytes.readBigUInt64LE(at));
}

/**
 * The write time: at most MAX_DATE_MS, so that every reader can show it (a
 * later one is no clock, only a way to make `new Date()` throw).
 */
function writeTime(bytes: Buffer, at: number, path: string): number {
  const v = bytes.readBigUInt64LE(at);
  if (v > BigInt(MAX_DATE_MS)) throw corrupt(path, 'the write time is out of range');
  return Number(v);
}

/**
 * Decodes the membership part from the start of `bytes` (a whole file or a
 * prefix). Structure only: signatures are checked elsewhere.
 */
export function decodeMembership(bytes: Buffer, path: string): { membership: Membership; length: number } {
  if (containerVersion(bytes) !== SHARED_VERSION) throw corrupt(path, 'it is not a shared (version 2) container');
  if (bytes.length < FIXED) throw corrupt(path, 'the file is truncated inside the header');
  const r = bytes.readUInt8(OFF.count);
  if (r < 1 || r > MAX_RECIPIENTS) throw corrupt(path, `the recipient count ${r} is out of range`);
  const length = FIXED + STANZA_BYTES * r;
  if (bytes.length < length) throw corrupt(path, 'the file is truncated inside the recipient list');
  const copy = (from: number, n: number) => Buffer.from(bytes.subarray(from, from + n));
  const stanzas: Stanza[] = [];
  const seen = new Set<string>();
  for (let i = 0; i < r; i++) {
    const o = FIXED + i * STANZA_BYTES;
    const s = { x25519: copy(o, 32), ed25519: copy(o + 32, 32), sealedKey: copy(o + 64, SEALED_KEY_BYTES) };
    for (const k of [s.x25519.toString('hex'), s.ed25519.toString('hex')]) {
      if (seen.has(k)) throw corrupt(path, 'a recipient appears twice');
      seen.add(k);
    }
    stanzas.push(s);
  }
  const epoch = bytes.readUInt32LE(OFF.epoch);
  if (epoch < 1) throw corrupt(path, 'the membership epoch is 0');
  return {
    length,
    membership: { containerId: copy(OFF.containerId, 16), epoch, commitment: copy(OFF.commit, 32), stanzas },
  };
}

/** Splits and decodes a whole version 2 file. Every structural problem is CONTAINER_CORRUPT. */
export function decodeShared(bytes: Buffer, path: string): SharedFile {
  const { membership, length: s } = decodeMembership(bytes, path);
  const r = membership.stanzas.length;
  const h = headerLength(r);
  if (bytes.length < h + TAG_BYTES + SIGNATURE_BYTES)
    throw corrupt(path, 'the file is truncated (no room for a body and a signature)');
  const w = s + SIGNATURE_BYTES;
  const revision = counter(bytes, w);
  if (revision < 1) throw corrupt(path, 'the revision is 0');
  const lastWrites: number[] = [];
  for (let i = 0; i < r; i++) lastWrites.push(counter(bytes, w + 48 + 8 * i));
  const end = bytes.length - SIGNATURE_BYTES;
  return {
    membership,
    write: {
      revision,
      writtenAt: writeTime(bytes, w + 8, path),
      writer: Buffer.from(bytes.subarray(w + 16, w + 48)),
      lastWrites,
      bodyNonce: Buffer.from(bytes.subarray(w + 48 + 8 * r, h)),
    },
    membershipBytes: bytes.subarray(0, s),
    ownerSignature: bytes.subarray(s, w),
    headerBytes: bytes.subarray(0, h),
    body: bytes.subarray(h, end),
    signedBytes: bytes.subarray(0, end),
    writerSignature: bytes.subarray(end),
  };
}

/** The index of the stanza whose Ed25519 key is `ed25519`, or -1. */
export function stanzaIndex(m: Membership, ed25519: Buffer): number {
  return m.stanzas.findIndex((s) => s.ed25519.equals(ed25519));
}

export { NONCE_BYTES as BODY_NONCE_BYTES };
