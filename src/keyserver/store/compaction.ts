/**
 * Compaction: the live state is written to store.log.compact while the server
 * keeps serving and appending to store.log; then, inside one exclusive section
 * of the writer, the records appended meanwhile (the tail after the snapshot
 * offset) are copied over, the new file is fsync'ed and renamed over
 * store.log (atomic), the directory fsync'ed, and appends continue on the new
 * file. A crash before the rename leaves the old log intact (the .compact file
 * is deleted at startup); after it, the new log is complete.
 */
import { constants } from 'node:fs';
import { open, rename, rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { LogWriter } from './log-writer.js';
import { Writer } from '../wire/codec.js';
import { MAGIC_V2, writeLogRecord } from './log-format.js';
import type { ShareState, StoreRecord } from './records.js';
import { tombstoneRecord, type ShareIndex, type Tombstone } from './share-index.js';
import { COMPACT_NAME, LOG_NAME } from './state-dir.js';

export interface Snapshot {
  /** Read after the cut and while requests run: must not change with the index. close() ends it early. */
  shares: Iterable<ShareState> & { close?(): void };
  tombstones: Tombstone[];
  /** Replication acknowledgements (replAck records), kept so a restart resends only what is unacknowledged. */
  acks: StoreRecord[];
  checkpoint: StoreRecord;
}

/** The live state of `index` as a compaction writes it: shares, tombstones, acknowledgements and a checkpoint. */
export function indexSnapshot(index: ShareIndex, serverId: number, originEpoch: number, now: number): Snapshot {
  return {
    shares: index.shares.snapshot(),
    tombstones: [...index.tombstones.values()],
    acks: [...index.acks.keys()].map((peer) => ({
      type: 'replAck' as const,
      stamp: { origin: serverId, epoch: originEpoch, seq: index.lastSequence },
      ack: index.ackVector(peer),
    })),
    checkpoint: {
      type: 'checkpoint',
      stamp: { origin: serverId, epoch: originEpoch, seq: index.lastSequence },
      writtenAt: now,
    },
  };
}

export interface CompactionResult {
  oldSize: number;
  newSize: number;
  shares: number;
  tailBytes: number;
  /** Records in the new log (those written here and the tail's). */
  records: number;
}

/**
 * Bytes of snapshot encoded between two awaits (and the tail's copy buffer).
 * Encoding a chunk holds the event loop: with 1 MiB (about 6,000 shares) the
 * requests that queued meanwhile came in bursts. The installed unit's peak
 * RSS while compacting under load: 100.2-101.7 MB with 1 MiB chunks,
 * 97.7-100.8 MB with 128 KiB (docs/benchmarks.md, "Memory"): some of the
 * time under 100 MB, not reliably.
 */
const CHUNK = 1 << 17;

/**
 * Writes the live state of `snap` (the checkpoint, the unexpired shares with their fetch counts,
 * the tombstones, the acknowledgements) through `write`, in chunks of about CHUNK bytes encoded
 * into one buffer each; resolves with the shares kept and the records written.
 */
async function writeSnapshot(
  snap: Snapshot,
  now: number,
  write: (buf: Buffer) => Promise<void>,
): Promise<{ kept: number; records: number }> {
  let kept = 0;
  let records = 1; // the checkpoint
  // One buffer for every chunk: it is reused once its bytes are written.
  const w = new Writer(CHUNK + 4096);
  w.bytes(MAGIC_V2);
  writeLogRecord(w, snap.checkpoint);
  const flush = async () => {
    await write(w.finish());
    w.reset();
  };
  for (const share of snap.shares) {
    if (share.expiresAt <= now) continue;
    kept++;
    records++;
    writeLogRecord(w, { type: 'putShare', stamp: share.stamp, share });
    // The put carries the count; this record keeps the stamp of the fetch that set it.
    if (share.fetchStamp) {
      records++;
      writeLogRecord(w, {
        type: 'fetchCount',
        stamp: share.fetchStamp,
        code: share.code,
        fetchCount: share.fetchCount,
      });
    }
    if (w.length >= CHUNK) await flush();
  }
  for (const t of snap.tombstones) {
    records++;
    writeLogRecord(w, tombstoneRecord(t));
    if (w.length >= CHUNK) await flush();
  }
  records += snap.acks.length;
  for (const ack of snap.acks) writeLogRecord(w, ack);
  if (w.length > 0) await write(w.finish());
  return { kept, records };
}

export async function compactLog(args: {
  dir: string;
  writer: LogWriter;
  snapshot: () => Snapshot;
  now: number;
  syncDir: () => Promise<void>;
}): Promise<CompactionResult> {
  const { writer, now } = args;
  const tmpPath = join(args.dir, COMPACT_NAME);
  // 1. A consistent cut: no batch in flight, so the index matches the file up to `offset`.
  const { snap, offset } = await writer.exclusive(async () => ({ snap: args.snapshot(), offset: writer.size }));

  const out = await open(tmpPath, constants.O_RDWR | constants.O_CREAT | constants.O_TRUNC, 0o600);
  let size = 0;
  let swapped = false;
  try {
    const write = async (buf: Buffer) => {
      let done = 0;
      while (done < buf.length) done += (await out.write(buf, done, buf.length - done, size + done)).bytesWritten;
      size += buf.length;
    };
    // 2. The snapshot, in chunks: each await lets requests run.
    const { kept, records: snapshotRecords } = await writeSnapshot(snap, now, write);
    let records = snapshotRecords;
    await out.sync();

    // 3. The swap: copy what was appended since the cut, then rename.
    return await writer.exclusive(async () => {
      const oldSize = writer.size;
      const tailBytes = oldSize - offset;
      const buf = Buffer.alloc(Math.min(CHUNK, Math.max(tailBytes, 1)));
      for (let pos = offset; pos < oldSize; ) {
        const n = Math.min(buf.length, oldSize - pos);
        const r = await writer.file.read(buf, 0, n, pos);
        if (r.bytesRead === 0) throw new Error('store log shrank during compaction');
        await write(buf.subarray(0, r.bytesRead));
        // Stuffed records (format 2): a 0x00 is only ever the delimiter after a record.
        for (let i = 0; i < r.bytesRead; i++) if (buf[i] === 0) records++;
        pos += r.bytesRead;
      }
      await out.sync();
      await rename(tmpPath, join(args.dir, LOG_NAME));
      swapped = true;
      // Switch before anything else can fail: the old inode is no longer store.log.
      const old = writer.replaceFile(out, size);
      await old.close();
      await args.syncDir();
      return { oldSize, newSize: size, shares: kept, tailBytes, records };
    });
  } finally {
    snap.shares.close?.();
    if (!swapped) {
      await out.close().catch(() => undefined);
      await rm(tmpPath, { force: true });
    }
  }
}
