/**
 * Reads a state folder's log without taking its lock and without repairing
 * anything, for resync-peer: the server that owns the folder may be running.
 * The log is append-only with self-delimiting, checksummed records, so any
 * prefix of it is consistent; reading stops at the first record that is
 * incomplete (still being written) or damaged. A compaction renaming a new
 * file over store.log meanwhile does not disturb the reader: its open handle
 * keeps the old file.
 */
import { open } from 'node:fs/promises';
import { join } from 'node:path';
import { KeyServerError } from '../errors.js';
import { MAGIC, RecordDecodeError, decodeRecord, readFrame } from './records.js';
import { ShareIndex } from './share-index.js';
import { LOG_NAME } from './state-dir.js';

export interface ReadOnlyState {
  index: ShareIndex;
  records: number;
  /** Why reading stopped before the end of the file, if it did. */
  stoppedAt: string | undefined;
}

export async function readStateReadOnly(dir: string, serverId: number): Promise<ReadOnlyState> {
  const path = join(dir, LOG_NAME);
  let data: Buffer;
  try {
    const fh = await open(path, 'r');
    try {
      data = await fh.readFile();
    } finally {
      await fh.close();
    }
  } catch (err) {
    throw new KeyServerError('STATE_UNREADABLE', `cannot read ${path} (${(err as NodeJS.ErrnoException).code ?? 'error'})`);
  }
  if (data.length < MAGIC.length || !data.subarray(0, MAGIC.length).equals(MAGIC)) {
    throw new KeyServerError('STATE_UNREADABLE', `${path} is not a key server store (bad header)`);
  }
  const index = new ShareIndex(serverId);
  let offset = MAGIC.length;
  let records = 0;
  let stoppedAt: string | undefined;
  while (offset < data.length) {
    const frame = readFrame(data, offset);
    if (frame.kind !== 'frame') {
      stoppedAt = `${frame.kind === 'damaged' ? frame.reason : 'incomplete record'} at offset ${offset}`;
      break;
    }
    try {
      const rec = decodeRecord(frame.type, frame.body);
      if (rec) {
        index.apply(rec);
        records++;
      }
    } catch (err) {
      if (!(err instanceof RecordDecodeError)) throw err;
      stoppedAt = `undecodable record at offset ${offset}`;
      break;
    }
    offset += frame.size;
  }
  return { index, records, stoppedAt };
}
