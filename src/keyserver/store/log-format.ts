/**
 * The store log on disk (docs/key-server.md, "Store format"):
 *
 *   version 2 (written): "SKSLOG" 0x00 0x02, then per record COBS(frame) 0x00
 *   version 1 (read):    "SKSLOG" 0x00 0x01, then frames back to back
 *
 * A frame is the record as records.ts encodes it (u32 length, u8 type,
 * payload, CRC-32C), the same bytes replication sends. Version 2 stuffs each
 * frame (cobs.ts) so that a 0x00 occurs only between records: after damage,
 * reading resumes at the next 0x00, and no byte sequence inside a value can
 * pass for a record. Version 1 files are still read (a damaged one with a
 * byte-by-byte search, log-scanner.ts) and rewritten as version 2 at start-up.
 */
import { Writer } from '../wire/codec.js';
import { cobsEncode, encodedBound } from './cobs.js';
import { FRAME_OVERHEAD, MAX_RECORD, writeRecord, type StoreRecord } from './records.js';

export const MAGIC_V1 = Buffer.from([0x53, 0x4b, 0x53, 0x4c, 0x4f, 0x47, 0x00, 0x01]);
export const MAGIC_V2 = Buffer.from([0x53, 0x4b, 0x53, 0x4c, 0x4f, 0x47, 0x00, 0x02]);
export const HEADER_SIZE = 8;
/** The longest frame: a record of MAX_RECORD bytes with its length and checksum. */
export const MAX_FRAME = MAX_RECORD + FRAME_OVERHEAD;
/** The longest stuffed frame, delimiter not included. */
export const MAX_SEGMENT = encodedBound(MAX_FRAME);

export type LogFormat = 1 | 2;

/** The format a file header names, undefined for anything else (damage or another file). */
export function headerFormat(head: Uint8Array): LogFormat | undefined {
  if (head.length < HEADER_SIZE) return undefined;
  const h = Buffer.from(head.buffer, head.byteOffset, HEADER_SIZE);
  if (h.equals(MAGIC_V2)) return 2;
  if (h.equals(MAGIC_V1)) return 1;
  return undefined;
}

// One frame is encoded here, then stuffed into `stuffed`: no allocation per record.
const frameWriter = new Writer(1024);
const stuffed = Buffer.allocUnsafe(MAX_SEGMENT + 1);

/** Appends the stuffed `frame` and its delimiter to `w`. */
export function writeLogFrame(w: Writer, frame: Uint8Array): Writer {
  const end = cobsEncode(frame, stuffed, 0);
  stuffed[end] = 0;
  return w.bytes(stuffed.subarray(0, end + 1));
}

/** Appends `rec` as the log stores it (several records to one buffer: one write). */
export function writeLogRecord(w: Writer, rec: StoreRecord): Writer {
  writeRecord(frameWriter.reset(), rec);
  return writeLogFrame(w, frameWriter.written());
}

/** One record as the log stores it, in a buffer of its own. */
export function encodeLogRecord(rec: StoreRecord): Buffer {
  writeRecord(frameWriter.reset(), rec);
  const frame = frameWriter.written();
  const end = cobsEncode(frame, stuffed, 0);
  stuffed[end] = 0;
  return Buffer.from(stuffed.subarray(0, end + 1));
}
