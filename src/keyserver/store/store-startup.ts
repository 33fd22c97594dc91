/**
 * The start-up of the store's log: what an interrupted compaction or repair
 * left is removed, the log checked and applied to the index (recovery.ts),
 * its writer opened, and the damaged copies kept within the disk cap.
 */
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { DiskBudget } from '../disk/budget.js';
import { pruneDamagedCopies } from '../disk/damaged-copies.js';
import { LogWriter } from './log-writer.js';
import { openAndRecover } from './recovery.js';
import type { ShareIndex } from './share-index.js';
import { COMPACT_NAME, LOG_NAME, REPAIR_NAME, syncDirectory } from './state-dir.js';
import type { StoreOptions, StoreRecovery } from './store-types.js';

/** Opens and checks the log in `opts.dir`, filling `index`; resolves with its writer and what the check found. */
export async function openStoreLog(
  opts: StoreOptions,
  index: ShareIndex,
  budget: DiskBudget,
): Promise<{ writer: LogWriter; records: number; recovery: StoreRecovery; size: number }> {
  // A compaction or repair interrupted by a crash never renamed its file: the log is intact.
  await rm(join(opts.dir, COMPACT_NAME), { force: true });
  await rm(join(opts.dir, REPAIR_NAME), { force: true });
  const result = await openAndRecover(
    join(opts.dir, LOG_NAME),
    (rec) => index.apply(rec),
    opts.logger,
    () => syncDirectory(opts.dir),
    undefined,
    join(opts.dir, REPAIR_NAME),
  );
  const writer = new LogWriter(result.handle, result.size, opts.logger, budget.storeLogHardBytes);
  const recovery: StoreRecovery = {
    records: result.records,
    skipped: result.skipped,
    damagedCopy: result.damagedCopy,
    startedEmpty: result.startedEmpty,
  };
  opts.logger.info(
    `store: ${result.records} record(s) read from ${join(opts.dir, LOG_NAME)} (${result.size} bytes); ` +
      `${index.shares.size} share(s), ${index.pending} pending verification`,
  );
  await pruneDamagedCopies(opts.dir, { maxCount: budget.damagedCount, maxBytes: budget.damagedBytes }, opts.logger);
  return { writer, records: result.records + result.skippedUnknown, recovery, size: result.size };
}
