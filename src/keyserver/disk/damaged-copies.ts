/**
 * The copies of damaged store logs (`store.log.damaged-<time>`) that the
 * start-up check keeps (store/recovery.ts), bounded: at most a count and a
 * total size (disk/budget.ts), the oldest removed first, each removal
 * logged. The newest copy goes too when it alone is over the size: the disk
 * cap holds whatever the copies would have been worth.
 */
import { readdir, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from '../logger.js';

export const DAMAGED_PREFIX = 'store.log.damaged-';

export interface DamagedCopy {
  name: string;
  bytes: number;
}

/** The damaged copies in `dir`, oldest first (their names end in an ISO time, so names sort by time). */
export async function listDamagedCopies(dir: string): Promise<DamagedCopy[]> {
  const names = (await readdir(dir)).filter((n) => n.startsWith(DAMAGED_PREFIX)).sort();
  const out: DamagedCopy[] = [];
  for (const name of names) {
    const s = await stat(join(dir, name)).catch(() => undefined);
    if (s?.isFile()) out.push({ name, bytes: s.size });
  }
  return out;
}

/**
 * Removes the oldest copies until at most `maxCount` are left and they hold
 * at most `maxBytes` together; returns what is left.
 */
export async function pruneDamagedCopies(
  dir: string,
  limits: { maxCount: number; maxBytes: number },
  logger: Logger,
): Promise<DamagedCopy[]> {
  const copies = await listDamagedCopies(dir);
  let total = copies.reduce((n, c) => n + c.bytes, 0);
  while (copies.length > 0 && (copies.length > limits.maxCount || total > limits.maxBytes)) {
    const oldest = copies.shift()!;
    try {
      await rm(join(dir, oldest.name), { force: true });
    } catch (err) {
      logger.error(`store: could not remove the damaged copy ${join(dir, oldest.name)}: ${(err as Error).message}`);
      continue;
    }
    total -= oldest.bytes;
    logger.warn(
      `store: removed the damaged copy ${join(dir, oldest.name)} (${oldest.bytes} bytes), oldest first: ` +
        `the disk cap keeps at most ${limits.maxCount} damaged copies and ${limits.maxBytes} bytes of them`,
    );
  }
  return copies;
}
