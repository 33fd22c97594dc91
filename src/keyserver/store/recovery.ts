/**
 * Startup check of the store log. The file is read in chunks, every frame's
 * checksum verified and every record decoded and applied. At the first damaged
 * or torn record the file is copied aside (store.log.damaged-<time>) and cut
 * there: everything before the damage survives. A file whose header is not
 * ours is moved aside whole and the store starts empty, loudly logged.
 */
import { constants } from 'node:fs';
import { copyFile, open, rename, type FileHandle } from 'node:fs/promises';
import { MAGIC, RecordDecodeError, decodeRecord, readFrame, type StoreRecord } from './records.js';

export interface RecoveryLogger {
  info(message: string): void;
  warn(message: string): void;
  error(message: string): void;
}

export interface RecoveryResult {
  /** Open for reading and writing, positioned by offset (not O_APPEND). */
  handle: FileHandle;
  /** Size of the good prefix (the file's size after any cut). */
  size: number;
  records: number;
  skippedUnknown: number;
  /** Path of the copy of a damaged file, when there was damage. */
  damagedCopy: string | undefined;
  startedEmpty: boolean;
}

const CHUNK = 1 << 20;

function stampForName(now: Date): string {
  return now.toISOString().replace(/[:.]/g, '-');
}

async function createFresh(path: string): Promise<FileHandle> {
  const handle = await open(path, constants.O_RDWR | constants.O_CREAT | constants.O_TRUNC, 0o600);
  await handle.write(MAGIC, 0, MAGIC.length, 0);
  await handle.sync();
  return handle;
}

/**
 * Opens (creating if needed) and checks the log at `path`, calling `apply`
 * for every good record in file order. `syncDir` makes renames durable.
 */
export async function openAndRecover(
  path: string,
  apply: (rec: StoreRecord) => void,
  logger: RecoveryLogger,
  syncDir: () => Promise<void>,
  now: () => Date = () => new Date(),
): Promise<RecoveryResult> {
  let handle: FileHandle;
  try {
    handle = await open(path, constants.O_RDWR);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    handle = await createFresh(path);
    await syncDir();
    return { handle, size: MAGIC.length, records: 0, skippedUnknown: 0, damagedCopy: undefined, startedEmpty: true };
  }

  const head = Buffer.alloc(MAGIC.length);
  const { bytesRead } = await handle.read(head, 0, MAGIC.length, 0);
  if (bytesRead < MAGIC.length || !head.equals(MAGIC)) {
    await handle.close();
    const aside = `${path}.damaged-${stampForName(now())}`;
    await rename(path, aside);
    logger.error(
      `STORE UNREADABLE: ${path} does not start with the store header; moved it to ${aside} and started an EMPTY store. ` +
        'Outstanding publish requests must be issued again.',
    );
    const fresh = await createFresh(path);
    await syncDir();
    return { handle: fresh, size: MAGIC.length, records: 0, skippedUnknown: 0, damagedCopy: aside, startedEmpty: true };
  }

  let records = 0;
  let skippedUnknown = 0;
  let good = MAGIC.length; // file offset just after the last good record
  let pending: Buffer = Buffer.alloc(0); // bytes from `good` on, not yet a whole frame
  let filePos = MAGIC.length;
  let damage: string | undefined;
  const chunk = Buffer.alloc(CHUNK);
  for (;;) {
    const r = await handle.read(chunk, 0, CHUNK, filePos);
    if (r.bytesRead === 0) break;
    filePos += r.bytesRead;
    pending = pending.length === 0 ? Buffer.from(chunk.subarray(0, r.bytesRead)) : Buffer.concat([pending, chunk.subarray(0, r.bytesRead)]);
    let offset = 0;
    for (;;) {
      const frame = readFrame(pending, offset);
      if (frame.kind === 'incomplete') break;
      if (frame.kind === 'damaged') {
        damage = frame.reason;
        break;
      }
      let rec: StoreRecord | undefined;
      try {
        rec = decodeRecord(frame.type, frame.body);
      } catch (err) {
        if (!(err instanceof RecordDecodeError)) throw err;
        damage = `undecodable record of type ${frame.type}: ${err.message}`;
        break;
      }
      if (rec) {
        apply(rec);
        records++;
      } else {
        skippedUnknown++;
      }
      offset += frame.size;
      good += frame.size;
    }
    pending = pending.subarray(offset);
    if (damage) break;
  }
  const fileSize = (await handle.stat()).size;
  if (!damage && good < fileSize) damage = `torn record at the end (${fileSize - good} byte(s))`;

  let damagedCopy: string | undefined;
  if (damage) {
    damagedCopy = `${path}.damaged-${stampForName(now())}`;
    await copyFile(path, damagedCopy, constants.COPYFILE_EXCL);
    await handle.truncate(good);
    await handle.sync();
    await syncDir();
    logger.warn(
      `store: ${damage} at offset ${good} of ${fileSize} bytes in ${path}; kept the ${records} record(s) before it, ` +
        `cut the rest and saved the damaged file as ${damagedCopy}`,
    );
  }
  if (skippedUnknown > 0) logger.warn(`store: skipped ${skippedUnknown} record(s) of a type this version does not know`);
  return { handle, size: good, records, skippedUnknown, damagedCopy, startedEmpty: false };
}
