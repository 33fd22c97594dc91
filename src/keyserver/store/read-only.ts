/**
 * Reads a state folder's log without taking its lock and without repairing
 * anything, for resync-peer: the server that owns the folder may be running.
 * Records are self-delimiting and checksummed, so any prefix of the log is
 * consistent; damaged bytes are skipped as the server's own start-up check
 * skips them (log-scanner.ts), and an incomplete record at the end (one being
 * written) is left out. A compaction renaming a new file over store.log
 * meanwhile does not disturb the reader: its open handle keeps the old file.
 */
import { open } from 'node:fs/promises';
import { join } from 'node:path';
import { KeyServerError } from '../errors.js';
import { HEADER_SIZE, headerFormat } from './log-format.js';
import { FileWindow, scanLog } from './log-scanner.js';
import { ShareIndex } from './share-index.js';
import { LOG_NAME } from './state-dir.js';

export interface ReadOnlyState {
  index: ShareIndex;
  records: number;
  /** What was skipped (damaged ranges, a record still being written at the end), if anything. */
  skipped: string | undefined;
}

export async function readStateReadOnly(dir: string, serverId: number): Promise<ReadOnlyState> {
  const path = join(dir, LOG_NAME);
  const unreadable = (err: unknown) =>
    new KeyServerError('STATE_UNREADABLE', `cannot read ${path} (${(err as NodeJS.ErrnoException).code ?? 'error'})`);
  const fh = await open(path, 'r').catch((err: unknown) => {
    throw unreadable(err);
  });
  try {
    const size = (await fh.stat()).size;
    const head = Buffer.alloc(HEADER_SIZE);
    const { bytesRead } = await fh.read(head, 0, HEADER_SIZE, 0);
    const format = headerFormat(head.subarray(0, bytesRead));
    if (format === undefined)
      throw new KeyServerError('STATE_UNREADABLE', `${path} is not a key server store (bad header)`);
    const index = new ShareIndex(serverId);
    let records = 0;
    const skipped: string[] = [];
    for await (const ev of scanLog(format, new FileWindow(fh, size))) {
      if (ev.kind === 'damage') {
        skipped.push(`${ev.reason} at offset ${ev.from} (${ev.to - ev.from} bytes)`);
      } else if (ev.rec) {
        index.apply(ev.rec);
        records++;
      }
    }
    return { index, records, skipped: skipped.length > 0 ? skipped.join('; ') : undefined };
  } catch (err) {
    if (err instanceof KeyServerError) throw err;
    throw unreadable(err);
  } finally {
    await fh.close();
  }
}
