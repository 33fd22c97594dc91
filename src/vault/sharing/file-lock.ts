/**
 * One writer at a time for a shared container file that lives outside the
 * vault (a shared folder, a git checkout), between every member and Unix
 * user who can write its folder.
 *
 * The lock is `.<file>.lock` beside the file, created with O_EXCL: it works
 * wherever the file itself can be replaced (every local file system, NFS,
 * SMB), where flock(2) is out of reach of Node without a native call and is
 * not honoured by every network file system. It holds the holder's pid, host,
 * uid and a random token, mode 0644 so that every member can read whose it is.
 *
 * Stale rule: a lock whose holder is gone (same host, no such pid) is broken
 * at once; any lock older than STALE_MS is broken (a holder on another host,
 * or a pid reused since). A holder holds it for one read-modify-write
 * (milliseconds), and checks its token right before its rename, so a holder
 * slower than STALE_MS writes nothing rather than race the one who broke it.
 * Breakers take `.<file>.lock.break` (O_EXCL) first and look at the lock again
 * under it, so two of them never remove the lock one of them just created.
 * In a sticky folder (/tmp-like) only the lock's owner can remove it: that
 * is reported with the command to run rather than waited on.
 */
import { closeSync, fchmodSync, lstatSync, openSync, readFileSync, unlinkSync, writeSync } from 'node:fs';
import { hostname } from 'node:os';
import { basename, dirname, join, resolve } from 'node:path';
import { errnoCode, ioError, VaultError } from '../errors.js';
import { randomBytes } from '../secure.js';
import { sleepSync } from '../../process-state.js';

/** A lock this old is abandoned, whoever holds it. */
export const STALE_MS = 15_000;
/** How long a writer waits for another member's write; longer than STALE_MS, so a crashed writer costs time, not a failure. */
export const WAIT_MS = 20_000;
/** A break lock is held for microseconds; one this old was left by a crash. */
const BREAK_STALE_MS = 5_000;
/** A lock file with no content yet: its creator died between create and write, or is writing it right now. */
const EMPTY_STALE_MS = 5_000;

interface Holder {
  pid: number;
  host: string;
  uid: number | null;
  at: number;
  token: string;
}

/** Locks this process holds, by file path, with their tokens (re-entrant). */
const held = new Map<string, { token: string; depth: number }>();

export function lockPathOf(file: string): string {
  return join(dirname(file), `.${basename(file)}.lock`);
}

interface Found {
  /** Tells one lock file from the next: inode, mtime and content. */
  key: string;
  holder: Holder | null;
  mtimeMs: number;
  uid: number;
}

function readHolder(path: string): Found | null {
  let st;
  try {
    st = lstatSync(path);
  } catch (err) {
    if (errnoCode(err) === 'ENOENT') return null;
    throw ioError(err, 'look at lock file', path);
  }
  let text = '';
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    if (errnoCode(err) === 'ENOENT') return null;
    // Unreadable (another user's, with a mode we did not set): judged by age alone.
  }
  let holder: Holder | null = null;
  try {
    const v = JSON.parse(text) as Partial<Holder>;
    if (
      typeof v.pid === 'number' &&
      typeof v.host === 'string' &&
      typeof v.token === 'string' &&
      typeof v.at === 'number'
    ) {
      holder = { pid: v.pid, host: v.host, uid: typeof v.uid === 'number' ? v.uid : null, at: v.at, token: v.token };
    }
  } catch {
    // Half-written: its creator crashed, or is writing it right now.
  }
  return { key: `${st.ino}:${st.mtimeMs}:${text}`, holder, mtimeMs: st.mtimeMs, uid: st.uid };
}

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return errnoCode(err) === 'EPERM'; // alive, another user's
  }
}

function isStale(found: Found): boolean {
  const age = Date.now() - found.mtimeMs;
  if (age > STALE_MS) return true;
  const h = found.holder;
  if (h === null) return age > EMPTY_STALE_MS;
  return h.host === hostname() && h.pid !== process.pid && !processAlive(h.pid);
}

function describe(h: Holder | null, uid: number): string {
  if (h === null) return `a writer (user ${uid})`;
  return `process ${h.pid} of user ${h.uid ?? uid} on ${h.host}, since ${new Date(h.at).toISOString()}`;
}

/** Creates the lock with our holder record; false when it exists. */
function tryCreate(path: string, token: string): boolean {
  let fd: number;
  try {
    fd = openSync(path, 'wx', 0o644);
  } catch (err) {
    if (errnoCode(err) === 'EEXIST') return false;
    throw ioError(err, 'create lock file', path);
  }
  try {
    // Readable by every member whatever the umask: it names the holder, nothing secret.
    if (process.platform !== 'win32') fchmodSync(fd, 0o644);
    const uid = typeof process.getuid === 'function' ? process.getuid() : null;
    writeSync(fd, JSON.stringify({ pid: process.pid, host: hostname(), uid, at: Date.now(), token }));
  } finally {
    closeSync(fd);
  }
  return true;
}

function unlinkOrExplain(path: string, found: { holder: Holder | null; uid: number }, lock: string): void {
  try {
    unlinkSync(path);
  } catch (err) {
    const code = errnoCode(err);
    if (code === 'ENOENT') return;
    if (code === 'EPERM' || code === 'EACCES') {
      throw new VaultError(
        'PERMISSION',
        `${lock} was left by a write that did not finish (${describe(found.holder, found.uid)}), and you may not remove it: ` +
          `the folder ${dirname(lock)} is sticky (like /tmp), so only user ${found.uid} or the folder's owner can. If no stash command of theirs is running, they run: rm ${lock}`,
      );
    }
    throw ioError(err, 'remove stale lock', path);
  }
}

/** Breaks the lock at `lock` if it is still the stale one found as `key`; false when another writer is at it. */
function breakStale(lock: string, key: string): boolean {
  const breaker = `${lock}.break`;
  const token = randomBytes(8).toString('hex');
  if (!tryCreate(breaker, token)) {
    const b = readHolder(breaker);
    if (b && Date.now() - b.mtimeMs > BREAK_STALE_MS) unlinkOrExplain(breaker, b, breaker);
    return false;
  }
  try {
    const now = readHolder(lock);
    if (now && now.key === key && isStale(now)) unlinkOrExplain(lock, now, lock);
  } finally {
    try {
      unlinkSync(breaker);
    } catch {
      // Broken in turn by someone who judged us crashed; nothing to release.
    }
  }
  return true;
}

/**
 * Runs `fn` holding the lock of `file`; waits up to `timeoutMs` for another
 * writer, then fails with SHARE_CHANGED (75: run it again). Re-entrant.
 */
export function withFileLock<T>(file: string, fn: () => T, timeoutMs = WAIT_MS): T {
  const id = resolve(file);
  const mine = held.get(id);
  if (mine) {
    mine.depth++;
    try {
      return fn();
    } finally {
      mine.depth--;
    }
  }
  const lock = lockPathOf(id);
  const token = randomBytes(12).toString('hex');
  const deadline = Date.now() + timeoutMs;
  while (!tryCreate(lock, token)) {
    const found = readHolder(lock);
    if (found === null) continue; // released meanwhile
    if (isStale(found)) {
      if (!breakStale(lock, found.key)) sleepSync(5);
      continue;
    }
    if (Date.now() >= deadline) {
      throw new VaultError(
        'SHARE_CHANGED',
        `${file} is being written by another member (${describe(found.holder, found.uid)}; lock ${lock}); nothing was written: run the command again`,
      );
    }
    sleepSync(5 + Math.floor(Math.random() * 20)); // jitter, so two waiters do not poll in step
  }
  held.set(id, { token, depth: 1 });
  try {
    return fn();
  } finally {
    held.delete(id);
    // Only our own lock is removed: after STALE_MS someone may have broken it and taken theirs.
    if (readHolder(lock)?.holder?.token === token) {
      try {
        unlinkSync(lock);
      } catch {
        // Broken meanwhile; nothing to release.
      }
    }
  }
}

/**
 * Throws SHARE_CHANGED unless this process still holds the lock of `file`:
 * called right before the rename, so a holder who took longer than STALE_MS
 * (suspended, stopped) and lost its lock to a breaker replaces nothing.
 */
export function assertLockHeld(file: string): void {
  const mine = held.get(resolve(file));
  const lock = lockPathOf(resolve(file));
  if (!mine || readHolder(lock)?.holder?.token !== mine.token) {
    throw new VaultError(
      'SHARE_CHANGED',
      `this write of ${file} took longer than ${STALE_MS / 1000} s, and another writer took over its lock (${lock}); nothing was written: run the command again`,
    );
  }
}
