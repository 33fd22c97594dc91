/**
 * The state directory: created owner-only, guarded by a pid lock file so two
 * servers never append to one log, and made durable after renames (fsync of
 * the directory itself).
 */
import { constants, readFileSync } from 'node:fs';
import { mkdir, open, readFile, unlink, chmod } from 'node:fs/promises';
import { join } from 'node:path';
import { StashError } from '../../errors.js';
import { alive } from '../../process-state.js';

export const LOG_NAME = 'store.log';
export const COMPACT_NAME = 'store.log.compact';
/** A clean copy the start-up check writes before it replaces a damaged log. */
export const REPAIR_NAME = 'store.log.repair';
export const LOCK_NAME = 'lock';

/** Creates `dir` (mode 0700) if needed. */
export async function prepareStateDir(dir: string): Promise<void> {
  await mkdir(dir, { recursive: true, mode: 0o700 });
  await chmod(dir, 0o700).catch(() => undefined);
}

/** fsync of a directory, so a rename or create in it survives a crash. */
export async function syncDirectory(dir: string): Promise<void> {
  const fh = await open(dir, constants.O_RDONLY | constants.O_DIRECTORY);
  try {
    await fh.sync();
  } finally {
    await fh.close();
  }
}

/**
 * What names a process beyond its pid, on Linux: its start time (field 22 of
 * /proc/<pid>/stat, clock ticks since boot) and the boot id. null elsewhere,
 * and for a zombie (killed, not yet reaped: it holds nothing any more).
 */
function processIdentity(pid: number): string | null {
  if (process.platform !== 'linux') return null;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    if (fields[0] === 'Z' || fields[0] === 'X') return null;
    const boot = readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim();
    return fields[19] === undefined ? null : `${fields[19]} ${boot}`;
  } catch {
    return null;
  }
}

/**
 * Whether the holder written in a lock file still runs. The lock names the
 * pid and, on Linux, the process's start time and the boot id: after a crash
 * and a reboot (or in a container) another process may have the same pid,
 * and a pid alone would keep the server from starting until someone removed
 * the lock by hand.
 */
function holderRuns(pid: number, identity: string): boolean {
  if (!alive(pid)) return false;
  if (process.platform !== 'linux') return true;
  const now = processIdentity(pid);
  if (now === null) return false; // a zombie, or gone meanwhile
  return identity === '' || identity === now; // an old lock (pid only): the pid check decides
}

/** Directories locked by this process (a pid equal to ours is then not stale). */
const heldHere = new Set<string>();

/**
 * Takes the directory's lock for this process. A lock left by a dead process
 * (kill -9, power loss) is taken over; a live holder is an error.
 */
export async function lockStateDir(dir: string): Promise<() => Promise<void>> {
  const path = join(dir, LOCK_NAME);
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      const fh = await open(path, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL, 0o600);
      await fh.writeFile(`${`${process.pid} ${processIdentity(process.pid) ?? ''}`.trim()}\n`);
      await fh.close();
      heldHere.add(path);
      return async () => {
        heldHere.delete(path);
        const text = await readFile(path, 'utf8').catch(() => '');
        if (Number(text.trim().split(' ')[0]) === process.pid) await unlink(path).catch(() => undefined);
      };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      const [pidText = '', ...identity] = (await readFile(path, 'utf8').catch(() => '')).trim().split(' ');
      const holder = Number(pidText);
      // Our own pid counts as stale unless this process really holds it: in a
      // container the server may be pid 1 on every start.
      const ours = holder === process.pid;
      if (
        Number.isInteger(holder) &&
        holder > 0 &&
        ((ours && heldHere.has(path)) || (!ours && holderRuns(holder, identity.join(' '))))
      ) {
        throw new StashError('STATE_DIR_LOCKED', `the state directory ${dir} is in use by process ${holder}`);
      }
      // Stale: written by a process that is gone. Remove and retry the exclusive create.
      await unlink(path).catch(() => undefined);
    }
  }
  throw new StashError('STATE_DIR_LOCKED', `could not take the lock ${path} (another server keeps starting?)`);
}
