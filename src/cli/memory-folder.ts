/**
 * Folders in memory (tmpfs or ramfs), so that a file of plaintext written
 * there never reaches a disk: the one place that chooses where `stash run
 * --file` and `stash edit` put their files, and where wl-copy puts what it
 * copies (clipboard/wayland.ts). Tried in this order:
 *
 * 1. XDG_RUNTIME_DIR, when it is a tmpfs folder of the user's own (logind's
 *    /run/user/UID, cleared at logout);
 * 2. /dev/shm, when it is a tmpfs: a fresh 0700 folder there is the user's
 *    alone (mkdtemp refuses a name that exists), as pass makes one; it is
 *    there under `su -` and over ssh without logind, where XDG_RUNTIME_DIR is
 *    unset;
 * 3. nothing: refused (69) with the fix, unless --insecure-tmp allows the
 *    temporary folder, which may be on disk (a warning says so).
 *
 * An XDG_RUNTIME_DIR on disk is passed over, never written to.
 */
import { lstatSync, mkdtempSync, statfsSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { StashError } from '../errors.js';
import { warn } from './output.js';

const TMPFS_MAGIC = 0x01021994;
const RAMFS_MAGIC = 0x858458f6;

/** The shared memory folder of Linux, tried when XDG_RUNTIME_DIR is not usable. */
export const SHM_DIR = '/dev/shm';

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

/** Where to look, for memoryParent(): the environment's XDG_RUNTIME_DIR, the shared memory folder and our uid. */
export interface MemoryCandidates {
  runtime: string | undefined;
  shm: string;
  /** -1 where there are no uids (Windows): no owner check. */
  uid: number;
}

/** Why XDG_RUNTIME_DIR cannot hold the file, or null when it can. */
function runtimeProblem(runtime: string | undefined, uid: number): string | null {
  if (!runtime) return 'XDG_RUNTIME_DIR is not set';
  let st: ReturnType<typeof lstatSync>;
  try {
    st = lstatSync(runtime);
  } catch {
    return `XDG_RUNTIME_DIR (${runtime}) does not exist`;
  }
  if (!st.isDirectory()) return `XDG_RUNTIME_DIR (${runtime}) is not a folder`;
  if (uid >= 0 && st.uid !== uid) return `XDG_RUNTIME_DIR (${runtime}) belongs to another user`;
  // Where the type cannot be told (not Linux), XDG_RUNTIME_DIR is taken on its word, as the spec gives it.
  if (inMemory(runtime) === false) return `XDG_RUNTIME_DIR (${runtime}) is not a tmpfs`;
  return null;
}

/** Why the shared memory folder cannot hold the file, or null when it can. */
function shmProblem(shm: string): string | null {
  try {
    if (!statSync(shm).isDirectory()) return `${shm} is not a folder`;
  } catch {
    return `${shm} does not exist`;
  }
  // Only a file system known to be in memory: /dev/shm is a guess, not a promise of any standard.
  return inMemory(shm) === true ? null : `${shm} is not a tmpfs`;
}

/**
 * The folder in memory to make a private folder in (the order above), or
 * null with what is wrong with each candidate.
 */
export function memoryParent(c: MemoryCandidates): { parent: string | null; problems: string[] } {
  const problems: string[] = [];
  const runtime = runtimeProblem(c.runtime, c.uid);
  if (runtime === null) return { parent: c.runtime!, problems };
  problems.push(runtime);
  const shm = shmProblem(c.shm);
  if (shm === null) return { parent: c.shm, problems };
  problems.push(shm);
  return { parent: null, problems };
}

/** memoryParent() for this process. */
export function ownMemoryParent(): ReturnType<typeof memoryParent> {
  const uid = typeof process.getuid === 'function' ? process.getuid() : -1;
  return memoryParent({ runtime: process.env.XDG_RUNTIME_DIR, shm: SHM_DIR, uid });
}

/**
 * A new 0700 folder for files of plaintext, in memory (see above). Without
 * one: NO_RUNTIME_DIR (69) naming what is wrong and the fix, before anything
 * is written, or with `insecureTmp` a folder in the temporary folder and a
 * warning. `prefix`: the start of the folder's name ("stash-run-").
 */
export function makeMemoryFolder(prefix: string, insecureTmp: boolean): string {
  const { parent, problems } = ownMemoryParent();
  if (parent !== null) return mkdtempSync(join(parent, prefix));
  const why = problems.join(', and ');
  if (!insecureTmp) {
    throw new StashError(
      'NO_RUNTIME_DIR',
      `there is no private tmpfs for the file (${why}), and a file elsewhere could reach a disk; nothing was written. ` +
        'Log in through a session that provides XDG_RUNTIME_DIR (systemd-logind makes /run/user/UID), mount a tmpfs on /dev/shm, ' +
        'or add --insecure-tmp to use the temporary folder, which may be on disk',
    );
  }
  const dir = mkdtempSync(join(tmpdir(), prefix));
  warn(
    `there is no private tmpfs (${why}): the secret is written to a file in ${dir} (--insecure-tmp); it is overwritten and removed afterwards, but may have reached the disk`,
  );
  return dir;
}
