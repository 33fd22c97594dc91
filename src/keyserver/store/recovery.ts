/**
 * Startup check of the store log. Every record is read (log-scanner.ts:
 * checksum verified, payload decoded) and applied; damaged bytes are skipped
 * and reading resumes at the next good record, so a bad record costs that
 * record only. Then the file is made clean again:
 *
 * - damage only at the end (a torn write): the file is copied aside
 *   (store.log.damaged-<time>) and cut after the last good record;
 * - damage anywhere else, a damaged file header, or a version 1 file: the
 *   good records are written to store.log.repair (version 2), fsync'ed and
 *   renamed over store.log; a damaged original is kept as
 *   store.log.damaged-<time> (a hard link, or a copy).
 *
 * A file in which no record at all can be read is not a store log: it is
 * moved aside whole and the store starts empty, loudly logged. What was
 * skipped (byte ranges and why) is logged and returned for `status`.
 */
import { constants } from 'node:fs';
import { copyFile, link, open, rename, rm, type FileHandle } from 'node:fs/promises';
import { Writer } from '../wire/codec.js';
import { HEADER_SIZE, MAGIC_V2, MAX_SEGMENT, headerFormat, writeLogFrame, type LogFormat } from './log-format.js';
import { FileWindow, scanLog } from './log-scanner.js';
import type { StoreRecord } from './records.js';

export interface RecoveryLogger {
  info(message: string): void;
  warn(message: string): void;
  error(message: string): void;
}

/** Bytes of the log that could not be read, with the first reason found in them. */
export interface SkippedRange {
  from: number;
  to: number;
  reason: string;
}

export interface RecoveryResult {
  /** Open for reading and writing, positioned by offset (not O_APPEND). */
  handle: FileHandle;
  /** Size of the clean file now in place. */
  size: number;
  records: number;
  skippedUnknown: number;
  /** Damaged byte ranges of the file as found (a damaged header is [0, 8)), in file order. */
  skipped: SkippedRange[];
  /** Path of the copy of a damaged file, when there was damage. */
  damagedCopy: string | undefined;
  /** The format the file was converted from (1), when it was not version 2. */
  convertedFrom: LogFormat | undefined;
  startedEmpty: boolean;
}

const CHUNK = 1 << 20;
/** Ranges named one by one in the log line; the rest are counted. */
const LOGGED_RANGES = 10;

function stampForName(now: Date): string {
  return now.toISOString().replace(/[:.]/g, '-');
}

async function createFresh(path: string): Promise<FileHandle> {
  const handle = await open(path, constants.O_RDWR | constants.O_CREAT | constants.O_TRUNC, 0o600);
  await handle.write(MAGIC_V2, 0, MAGIC_V2.length, 0);
  await handle.sync();
  return handle;
}

/** The format under which more records can be read (a damaged header does not say), or undefined: none. */
async function probeFormat(handle: FileHandle, size: number): Promise<LogFormat | undefined> {
  let best: LogFormat | undefined;
  let bestCount = 0;
  for (const format of [2, 1] as const) {
    let count = 0;
    for await (const ev of scanLog(format, new FileWindow(handle, size))) if (ev.kind === 'record') count++;
    if (count > bestCount) {
      best = format;
      bestCount = count;
    }
  }
  return best;
}

/** Writes the good records of the file, stuffed, to `tmpPath`; returns its handle and size. */
async function writeClean(
  handle: FileHandle,
  size: number,
  format: LogFormat,
  tmpPath: string,
): Promise<{ out: FileHandle; size: number }> {
  const out = await open(tmpPath, constants.O_RDWR | constants.O_CREAT | constants.O_TRUNC, 0o600);
  try {
    let written = 0;
    const w = new Writer(CHUNK + 2 * MAX_SEGMENT);
    const flush = async () => {
      const buf = w.finish();
      for (let done = 0; done < buf.length; )
        done += (await out.write(buf, done, buf.length - done, written + done)).bytesWritten;
      written += buf.length;
      w.reset();
    };
    w.bytes(MAGIC_V2);
    for await (const ev of scanLog(format, new FileWindow(handle, size))) {
      if (ev.kind !== 'record') continue;
      writeLogFrame(w, ev.frame);
      if (w.length >= CHUNK) await flush();
    }
    await flush();
    await out.sync();
    return { out, size: written };
  } catch (err) {
    await out.close().catch(() => undefined);
    await rm(tmpPath, { force: true });
    throw err;
  }
}

function describe(skipped: SkippedRange[]): string {
  const named = skipped.slice(0, LOGGED_RANGES).map((r) => `${r.from}-${r.to} (${r.reason})`);
  if (skipped.length > LOGGED_RANGES) named.push(`and ${skipped.length - LOGGED_RANGES} more`);
  return named.join(', ');
}

/** Reads every record of the log, calling `apply` on each it knows; adds the damaged ranges to `skipped`. */
async function applyRecords(
  handle: FileHandle,
  format: LogFormat,
  fileSize: number,
  apply: (rec: StoreRecord) => void,
  skipped: SkippedRange[],
): Promise<{ records: number; skippedUnknown: number }> {
  let records = 0;
  let skippedUnknown = 0;
  for await (const ev of scanLog(format, new FileWindow(handle, fileSize))) {
    if (ev.kind === 'record') {
      if (ev.rec) {
        apply(ev.rec);
        records++;
      } else {
        skippedUnknown++;
      }
      continue;
    }
    const last = skipped[skipped.length - 1];
    if (last && last.to === ev.from) last.to = ev.to;
    else skipped.push({ from: ev.from, to: ev.to, reason: ev.reason });
  }
  return { records, skippedUnknown };
}

/** A log as read: its open handle, what was found damaged in it, and where a damaged copy goes. */
interface ReadLog {
  path: string;
  handle: FileHandle;
  fileSize: number;
  format: LogFormat;
  skipped: SkippedRange[];
  records: number;
  damagedCopy: string | undefined;
}

/**
 * Makes a damaged or version 1 log clean: a torn end is cut off (the file copied aside first),
 * anything else rewritten to `repairPath` and renamed over the log (the damaged file kept).
 * Resolves with the handle and size of the clean log now in place.
 */
async function makeClean(
  log: ReadLog,
  repairPath: string,
  logger: RecoveryLogger,
  syncDir: () => Promise<void>,
): Promise<{ handle: FileHandle; size: number }> {
  const { path, fileSize, format, skipped, records, damagedCopy } = log;
  let { handle } = log;
  let size = fileSize;
  const skippedBytes = skipped.reduce((n, r) => n + r.to - r.from, 0);
  const damaged = skipped.length > 0;
  const tailOnly =
    format === 2 && skipped.length === 1 && skipped[0]!.from >= HEADER_SIZE && skipped[0]!.to === fileSize;
  if (tailOnly) {
    const cut = skipped[0]!;
    await copyFile(path, damagedCopy!, constants.COPYFILE_EXCL);
    await handle.truncate(cut.from);
    await handle.sync();
    await syncDir();
    size = cut.from;
    logger.warn(
      `store: torn record at the end (${cut.to - cut.from} byte(s), ${cut.reason}) at offset ${cut.from} of ${fileSize} bytes in ${path}; ` +
        `kept the ${records} record(s) before it, cut the rest and saved the damaged file as ${damagedCopy}`,
    );
  } else {
    const clean = await writeClean(handle, fileSize, format, repairPath);
    if (damagedCopy) {
      // The damaged file stays as it was under its new name; store.log is replaced atomically.
      await link(path, damagedCopy).catch(() => copyFile(path, damagedCopy, constants.COPYFILE_EXCL));
    }
    await rename(repairPath, path);
    await syncDir();
    await handle.close();
    handle = clean.out;
    size = clean.size;
    if (damaged) {
      logger.warn(
        `store: skipped ${skipped.length} damaged range(s), ${skippedBytes} of ${fileSize} bytes, in ${path}: ${describe(skipped)}; ` +
          `kept every record outside them (${records}) and saved the damaged file as ${damagedCopy}`,
      );
    }
    if (format !== 2)
      logger.info(`store: rewrote ${path} from store format ${format} to 2 (${fileSize} -> ${size} bytes)`);
  }
  return { handle, size };
}

/**
 * Opens (creating if needed) and checks the log at `path`, calling `apply`
 * for every good record in file order. `repairPath` is where a clean copy is
 * written before it replaces the log; `syncDir` makes renames durable.
 */
export async function openAndRecover(
  path: string,
  apply: (rec: StoreRecord) => void,
  logger: RecoveryLogger,
  syncDir: () => Promise<void>,
  now: () => Date = () => new Date(),
  repairPath = `${path}.repair`,
): Promise<RecoveryResult> {
  const empty = { records: 0, skippedUnknown: 0, skipped: [], convertedFrom: undefined, startedEmpty: true };
  let handle: FileHandle;
  try {
    handle = await open(path, constants.O_RDWR);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    handle = await createFresh(path);
    await syncDir();
    return { handle, size: HEADER_SIZE, damagedCopy: undefined, ...empty };
  }

  const fileSize = (await handle.stat()).size;
  const skipped: SkippedRange[] = [];
  const head = Buffer.alloc(HEADER_SIZE);
  const { bytesRead } = await handle.read(head, 0, HEADER_SIZE, 0);
  let format = headerFormat(head.subarray(0, bytesRead));
  if (format === undefined) {
    format = await probeFormat(handle, fileSize);
    if (format === undefined) {
      await handle.close();
      const aside = `${path}.damaged-${stampForName(now())}`;
      await rename(path, aside);
      logger.error(
        `STORE UNREADABLE: ${path} does not start with the store header and holds no readable record; moved it to ${aside} ` +
          'and started an EMPTY store. Outstanding publish requests must be issued again.',
      );
      const fresh = await createFresh(path);
      await syncDir();
      return { handle: fresh, size: HEADER_SIZE, damagedCopy: aside, ...empty };
    }
    skipped.push({ from: 0, to: Math.min(HEADER_SIZE, fileSize), reason: 'damaged file header' });
  }

  const { records, skippedUnknown } = await applyRecords(handle, format, fileSize, apply, skipped);
  const damagedCopy = skipped.length > 0 ? `${path}.damaged-${stampForName(now())}` : undefined;
  let size = fileSize;
  if (skipped.length > 0 || format !== 2)
    ({ handle, size } = await makeClean(
      { path, handle, fileSize, format, skipped, records, damagedCopy },
      repairPath,
      logger,
      syncDir,
    ));
  if (skippedUnknown > 0)
    logger.warn(`store: skipped ${skippedUnknown} record(s) of a type this version does not know`);
  return {
    handle,
    size,
    records,
    skippedUnknown,
    skipped,
    damagedCopy,
    convertedFrom: format === 2 ? undefined : format,
    startedEmpty: false,
  };
}
