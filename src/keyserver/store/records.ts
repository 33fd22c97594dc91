/**
 * Records of the store log and of replication (docs/key-server.md, "Store
 * format"); how the log file holds them is log-format.ts.
 *
 *   record = u32 length | u8 type | payload (length-1 bytes) | u32 crc32c(length..payload)
 *
 * Every payload starts with the replication stamp (origin server id,
 * origin_epoch, sequence) and the share code, so the same records can later
 * travel between servers as replication events (put_share, fetch_count,
 * tombstone) without a second format.
 */
import { Reader, Writer } from '../wire/codec.js';
import { crc32c } from './crc32c.js';

/** A length above this is damage, not data: real records are < 1 KiB. */
export const MAX_RECORD = 64 * 1024;
export const FRAME_OVERHEAD = 8;

export const RecordType = {
  putShare: 1,
  verify: 2,
  fetchCount: 3,
  tombstone: 4,
  checkpoint: 5,
  replAck: 6,
} as const;

export interface Stamp {
  origin: number;
  epoch: number;
  seq: number;
}

export interface ShareState {
  code: string;
  publicKey: Buffer;
  email: string;
  createdAt: number;
  expiresAt: number;
  /** 0 while pending verification. */
  verifiedAt: number;
  fetchCount: number;
  /** SHA-256 of the verification token; undefined once verified. */
  tokenHash: Buffer | undefined;
  /** Stamp of the last put or verification applied to this share. */
  stamp: Stamp;
  /** Stamp of the event that set the current fetch count (undefined: never fetched). */
  fetchStamp?: Stamp | undefined;
}

/** What a replication peer has acknowledged: per origin, the highest stamp sent to it. */
export interface AckVector {
  peer: string;
  acked: Array<{ origin: number; epoch: number; seq: number }>;
}

export type TombstoneReason = 'expired' | 'deleted';

export type StoreRecord =
  | { type: 'putShare'; stamp: Stamp; share: ShareState }
  | { type: 'verify'; stamp: Stamp; code: string; verifiedAt: number }
  | { type: 'fetchCount'; stamp: Stamp; code: string; fetchCount: number }
  | { type: 'tombstone'; stamp: Stamp; code: string; deletedAt: number; expiresAt: number; reason: TombstoneReason }
  | { type: 'checkpoint'; stamp: Stamp; writtenAt: number }
  | { type: 'replAck'; stamp: Stamp; ack: AckVector };

export class RecordDecodeError extends Error {}
const fail = (message: string): Error => new RecordDecodeError(message);

/** Writes the payload of `rec` and returns its record type. */
function writePayload(w: Writer, rec: StoreRecord): number {
  w.u8(rec.stamp.origin).u64(rec.stamp.epoch).u64(rec.stamp.seq);
  switch (rec.type) {
    case 'putShare': {
      const s = rec.share;
      w.text(s.code, 1)
        .u64(s.createdAt)
        .u64(s.expiresAt)
        .u64(s.verifiedAt)
        .u32(s.fetchCount)
        .u8(s.publicKey.length)
        .bytes(s.publicKey)
        .text(s.email, 1);
      w.u8(s.tokenHash ? s.tokenHash.length : 0);
      if (s.tokenHash) w.bytes(s.tokenHash);
      return RecordType.putShare;
    }
    case 'verify':
      w.text(rec.code, 1).u64(rec.verifiedAt);
      return RecordType.verify;
    case 'fetchCount':
      w.text(rec.code, 1).u32(rec.fetchCount);
      return RecordType.fetchCount;
    case 'tombstone':
      w.text(rec.code, 1)
        .u64(rec.deletedAt)
        .u64(rec.expiresAt)
        .u8(rec.reason === 'expired' ? 1 : 2);
      return RecordType.tombstone;
    case 'checkpoint':
      w.text('', 1).u64(rec.writtenAt);
      return RecordType.checkpoint;
    case 'replAck': {
      w.text('', 1).text(rec.ack.peer, 2).u8(rec.ack.acked.length);
      for (const a of rec.ack.acked) w.u8(a.origin).u64(a.epoch).u64(a.seq);
      return RecordType.replAck;
    }
  }
}

/** One framed record, ready to append. */
export function encodeRecord(rec: StoreRecord): Buffer {
  return writeRecord(new Writer(), rec).finish();
}

/** Appends the framed `rec` to `w` (several records to one buffer: one log write). */
export function writeRecord(w: Writer, rec: StoreRecord): Writer {
  const start = w.length;
  w.u32(0).u8(0);
  const type = writePayload(w, rec);
  w.setU32(start, w.length - start - 4).setU8(start + 4, type);
  return w.u32(crc32c(w.written(start)));
}

/**
 * Decodes the payload of a frame whose checksum already verified. Returns
 * undefined for a type this version does not know (skipped, not damage).
 */
export function decodeRecord(type: number, body: Uint8Array): StoreRecord | undefined {
  const r = new Reader(body, fail, 'record');
  const stamp: Stamp = { origin: r.u8('origin'), epoch: r.u64('origin_epoch'), seq: r.u64('sequence') };
  const code = r.text('code', 1);
  let rec: StoreRecord;
  switch (type) {
    case RecordType.putShare: {
      const createdAt = r.u64('created_at');
      const expiresAt = r.u64('expires_at');
      const verifiedAt = r.u64('verified_at');
      const fetchCount = r.u32('fetch_count');
      const publicKey = Buffer.from(r.bytesOf(r.u8('key length'), 'public key'));
      const email = r.text('email', 1);
      const hashLength = r.u8('token hash length');
      const tokenHash = hashLength === 0 ? undefined : Buffer.from(r.bytesOf(hashLength, 'token hash'));
      rec = {
        type: 'putShare',
        stamp,
        share: { code, publicKey, email, createdAt, expiresAt, verifiedAt, fetchCount, tokenHash, stamp },
      };
      break;
    }
    case RecordType.verify:
      rec = { type: 'verify', stamp, code, verifiedAt: r.u64('verified_at') };
      break;
    case RecordType.fetchCount:
      rec = { type: 'fetchCount', stamp, code, fetchCount: r.u32('fetch_count') };
      break;
    case RecordType.tombstone: {
      const deletedAt = r.u64('deleted_at');
      const expiresAt = r.u64('expires_at');
      const reason = r.u8('reason');
      if (reason !== 1 && reason !== 2) throw fail(`unknown tombstone reason ${reason}`);
      rec = { type: 'tombstone', stamp, code, deletedAt, expiresAt, reason: reason === 1 ? 'expired' : 'deleted' };
      break;
    }
    case RecordType.checkpoint:
      rec = { type: 'checkpoint', stamp, writtenAt: r.u64('written_at') };
      break;
    case RecordType.replAck: {
      const peer = r.text('peer', 2);
      const acked: AckVector['acked'] = [];
      for (let n = r.u8('ack count'); n > 0; n--)
        acked.push({ origin: r.u8('ack origin'), epoch: r.u64('ack epoch'), seq: r.u64('ack sequence') });
      rec = { type: 'replAck', stamp, ack: { peer, acked } };
      break;
    }
    default:
      return undefined;
  }
  r.end();
  return rec;
}

/**
 * Result of looking at the bytes at `offset`: a complete verified frame, the
 * need for more bytes, or damage (with the reason).
 */
export type FrameResult =
  | { kind: 'frame'; type: number; body: Uint8Array; size: number }
  | { kind: 'incomplete' }
  | { kind: 'damaged'; reason: string };

export function readFrame(buf: Uint8Array, offset: number): FrameResult {
  const left = buf.length - offset;
  if (left < 4) return { kind: 'incomplete' };
  const length = ((buf[offset]! << 24) >>> 0) + (buf[offset + 1]! << 16) + (buf[offset + 2]! << 8) + buf[offset + 3]!;
  if (length < 1 || length > MAX_RECORD) return { kind: 'damaged', reason: `impossible record length ${length}` };
  const size = 4 + length + 4;
  if (left < size) return { kind: 'incomplete' };
  const end = offset + 4 + length;
  const stored = ((buf[end]! << 24) >>> 0) + (buf[end + 1]! << 16) + (buf[end + 2]! << 8) + buf[end + 3]!;
  if (crc32c(buf.subarray(offset, end)) !== stored) return { kind: 'damaged', reason: 'checksum mismatch' };
  return { kind: 'frame', type: buf[offset + 4]!, body: buf.subarray(offset + 5, end), size };
}
