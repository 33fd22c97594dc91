/**
 * Whether a folder lives in memory (tmpfs or ramfs), so that a file written
 * there never reaches a disk. Used for `stash edit`'s file and for the file
 * wl-copy makes of what it copies (wayland.ts).
 */
import { statfsSync } from 'node:fs';

const TMPFS_MAGIC = 0x01021994;
const RAMFS_MAGIC = 0x858458f6;

/**
 * True when `dir` is on tmpfs or ramfs (Linux; statfs f_type), null where
 * that cannot be told (other systems, or statfs failed).
 */
export function inMemory(dir: string): boolean | null {
  if (process.platform !== 'linux') return null;
  try {
    const type = statfsSync(dir).type;
    return type === TMPFS_MAGIC || type === RAMFS_MAGIC;
  } catch {
    return null;
  }
}
