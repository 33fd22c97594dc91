/**
 * How the server splits its disk cap (`--disk-cap-bytes`, default 100 MB)
 * between what it writes: server.log and its rotated files, the store
 * (store.log, and the second file a compaction or a start-up repair writes
 * beside it), and the copies of damaged logs the start-up check keeps.
 * docs/operations.md, "Disk", states the same figures.
 *
 * The store gets two thirds of what the logs leave, and store.log itself at
 * most half of that: a compaction's second file holds at most what the log
 * holds, so the two together always fit. The damaged copies get the last
 * third, which holds one copy of a log at its largest.
 */

/** The default cap: the spec's "stays below about 100 MB of disk". */
export const DEFAULT_DISK_CAP_BYTES = 100_000_000;
/** The smallest cap accepted: below it the log files would rotate every few lines. */
export const MIN_DISK_CAP_BYTES = 1_000_000;
/** Rotated server.log files kept beside the current one (server.log.1, server.log.2). */
export const LOG_FILES_KEPT = 2;
/** Damaged store copies kept at most, whatever their size. */
export const DAMAGED_COPIES_KEPT = 3;

export interface DiskBudget {
  capBytes: number;
  /** server.log is rotated before it would pass this. */
  logFileBytes: number;
  logFilesKept: number;
  /** server.log and its rotated files together, at most. */
  logsBytes: number;
  /** store.log and a compaction's (or repair's) second file together, at most. */
  storeBytes: number;
  /** No write makes store.log larger than this (507 STORE_FULL). */
  storeLogHardBytes: number;
  /** Publishes and replicated shares are refused once store.log has reached this. */
  publishLimitBytes: number;
  /** Compaction starts at the latest here (compact_min_bytes and twice the last result are capped by it). */
  compactCapBytes: number;
  /** A compaction needs the log to have grown this much since the last one (no compaction loop over live shares). */
  compactGrowthBytes: number;
  /** store.log.damaged-* copies together, at most. */
  damagedBytes: number;
  damagedCount: number;
}

/** The split of `capBytes`. */
export function diskBudget(capBytes: number): DiskBudget {
  const logFileBytes = Math.floor(capBytes / 50);
  const logsBytes = logFileBytes * (LOG_FILES_KEPT + 1);
  const storeBytes = Math.floor(((capBytes - logsBytes) * 2) / 3);
  return {
    capBytes,
    logFileBytes,
    logFilesKept: LOG_FILES_KEPT,
    logsBytes,
    storeBytes,
    storeLogHardBytes: Math.floor(storeBytes / 2),
    publishLimitBytes: Math.floor(storeBytes * 0.45),
    compactCapBytes: Math.floor(storeBytes * 0.4),
    compactGrowthBytes: Math.floor(storeBytes / 32),
    damagedBytes: capBytes - logsBytes - storeBytes,
    damagedCount: DAMAGED_COPIES_KEPT,
  };
}

/**
 * The log size at which the store compacts: compact_min_bytes, or twice what
 * the last compaction left when that is more (as before the cap), but never
 * past the budget's cap; and always some growth past the last result (up to
 * compactGrowthBytes), so that a log of live shares near the cap is not
 * rewritten again and again.
 */
export function compactionThreshold(b: DiskBudget, compactMinBytes: number, lastResultBytes: number): number {
  const growth = Math.min(lastResultBytes, b.compactGrowthBytes);
  return Math.max(
    Math.min(Math.max(compactMinBytes, 2 * lastResultBytes), b.compactCapBytes),
    lastResultBytes + growth,
  );
}
