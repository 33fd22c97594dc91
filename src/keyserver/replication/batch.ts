/**
 * The body of POST /v1/replicate and its answer (docs/http-api.md,
 * "Replication"). Events are store records framed exactly as in store.log
 * (u32 length, u8 type, payload, u32 CRC-32C), so an event means the same on
 * disk and on the wire. Pure: no I/O.
 */
import { Reader, Writer, type Fail } from '../wire/codec.js';
import { WIRE_VERSION } from '../wire/messages.js';
import { RecordDecodeError, decodeRecord, encodeRecord, readFrame, type StoreRecord } from '../store/records.js';

export const MessageTypeReplicate = 0x10;
export const MessageTypeReplicateAck = 0x90;
/** Events per request; a put_share frame is under 400 bytes, so a batch stays far below the body limit. */
export const MAX_BATCH_EVENTS = 256;
export const MAX_REPLICATE_BODY = 1 << 20;
export const FLAG_RESYNC = 1;

export interface ReplicateBatch {
  clusterId: string;
  /** Server id of the sender. */
  sender: number;
  /** The sender's stream: a new id per outbound worker and process start (resync-peer: its own start time). */
  stream: number;
  /** 1, 2, 3, ... per stream; a receiver refuses a sequence it has already seen. */
  batchSeq: number;
  flags: number;
  events: StoreRecord[];
}

export interface ReplicateAck {
  serverId: number;
  applied: number;
  unchanged: number;
}

const replicable = new Set<StoreRecord['type']>(['putShare', 'fetchCount', 'tombstone']);

export function encodeBatch(b: ReplicateBatch): Buffer {
  const w = new Writer()
    .u8(WIRE_VERSION)
    .u8(MessageTypeReplicate)
    .text(b.clusterId, 1)
    .u8(b.sender)
    .u64(b.stream)
    .u64(b.batchSeq)
    .u8(b.flags)
    .u16(b.events.length);
  for (const ev of b.events) {
    if (!replicable.has(ev.type)) throw new RangeError(`not a replication event: ${ev.type}`);
    w.bytes(encodeRecord(ev));
  }
  return w.finish();
}

/** Strict decoder: truncation, bad checksums, other record types and trailing bytes fail. */
export function decodeBatch(bytes: Uint8Array, fail: Fail): ReplicateBatch {
  const r = new Reader(bytes, fail, 'replication batch');
  const version = r.u8('version');
  if (version !== WIRE_VERSION) throw fail(`unsupported encoding version ${version}`);
  const type = r.u8('message type');
  if (type !== MessageTypeReplicate) throw fail(`unexpected message type 0x${type.toString(16)}`);
  const clusterId = r.text('cluster_id', 1);
  const sender = r.u8('sender');
  const stream = r.u64('stream');
  const batchSeq = r.u64('batch sequence');
  const flags = r.u8('flags');
  const count = r.u16('event count');
  const events: StoreRecord[] = [];
  for (let i = 0; i < count; i++) {
    const at = r.position;
    const frame = readFrame(bytes, at);
    if (frame.kind !== 'frame')
      throw fail(`event ${i} at offset ${at}: ${frame.kind === 'damaged' ? frame.reason : 'truncated'}`);
    let rec: StoreRecord | undefined;
    try {
      rec = decodeRecord(frame.type, frame.body);
    } catch (err) {
      if (err instanceof RecordDecodeError) throw fail(`event ${i}: ${err.message}`);
      throw err;
    }
    if (!rec || !replicable.has(rec.type))
      throw fail(`event ${i}: record type ${frame.type} is not a replication event`);
    events.push(rec);
    r.bytesOf(frame.size, `event ${i}`);
  }
  r.end();
  return { clusterId, sender, stream, batchSeq, flags, events };
}

export function encodeAck(a: ReplicateAck): Buffer {
  return new Writer()
    .u8(WIRE_VERSION)
    .u8(MessageTypeReplicateAck)
    .u8(a.serverId)
    .u32(a.applied)
    .u32(a.unchanged)
    .finish();
}

export function decodeAck(bytes: Uint8Array, fail: Fail): ReplicateAck {
  const r = new Reader(bytes, fail, 'replication ack');
  if (r.u8('version') !== WIRE_VERSION || r.u8('message type') !== MessageTypeReplicateAck)
    throw fail('not a replication ack');
  const ack = { serverId: r.u8('server id'), applied: r.u32('applied'), unchanged: r.u32('unchanged') };
  r.end();
  return ack;
}
