/**
 * One writer at a time per vault. Reads need no lock (every file is replaced
 * by an atomic rename, so a reader sees a whole old or a whole new file), but a
 * read-modify-write such as "set one entry" from two `stash` processes at once
 * would otherwise lose one of the updates.
 *
 * The lock is `<vault>/vault.lock`, created with O_EXCL and holding the owner's
 * pid and host. A lock whose owner process is gone (same host), or that is older
 * than STALE_MS (any host, e.g. a vault on a shared folder), is broken. Critical
 * sections are milliseconds long and never wait for a user or a KDF.
 */
import { closeSync, openSync, readFileSync, statSync, unlinkSync, writeSync } from 'node:fs';
import { hostname } from 'node:os';
import { join, resolve } from 'node:path';
import { errnoCode, ioError, VaultError } from './errors.js';
import { sweepTempFiles } from './fs-atomic.js';
import { sleepSync } from '../process-state.js';

export const LOCK_FILE = 'vault.lock';
const STALE_MS = 120_000;
const DEFAULT_TIMEOUT_MS = 10_000;
const POLL_MS = 20;

/** Vault folders whose lock this process holds (makes nested use re-entrant). */
const held = new Set<string>();

interface LockOwner {
  pid: number;
  host: string;
}

function readOwner(path: string): LockOwner | null {
  try {
    const v = JSON.parse(readFileSync(path, 'utf8')) as Partial<LockOwner>;
    if (typeof v.pid === 'number' && typeof v.host === 'string') return { pid: v.pid, host: v.host };
  } catch {
    // Unreadable or half-written (the owner crashed between create and write).
  }
  return null;
}

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return errnoCode(err) === 'EPERM'; // exists, but belongs to someone else
  }
}

/** Identity of one lock file instance: a new lock has a new inode or mtime. */
type LockStamp = string;

function stampOf(path: string): LockStamp | null {
  try {
    const st = statSync(path);
    return `${st.ino}:${st.mtimeMs}`;
  } catch {
    return null;
  }
}

/** The stamp of the lock at `path` when it may be broken, else null. */
function staleStamp(path: string): LockStamp | null {
  let st;
  try {
    st = statSync(path);
  } catch {
    return null; // just released: retry the create
  }
  const age = Date.now() - st.mtimeMs;
  const stamp = `${st.ino}:${st.mtimeMs}`;
  if (age > STALE_MS) return stamp;
  const owner = readOwner(path);
  if (owner === null) return age > 5_000 ? stamp : null;
  const dead = owner.host === hostname() && owner.pid !== process.pid && !processAlive(owner.pid);
  return dead ? stamp : null;
}

function tryCreate(path: string): boolean {
  let fd: number;
  try {
    fd = openSync(path, 'wx', 0o600);
  } catch (err) {
    if (errnoCode(err) === 'EEXIST') return false;
    throw ioError(err, 'create lock file', path);
  }
  try {
    writeSync(fd, JSON.stringify({ pid: process.pid, host: hostname(), at: new Date().toISOString() }));
  } finally {
    closeSync(fd);
  }
  return true;
}

/**
 * Runs `fn` while holding the vault's write lock; waits up to `timeoutMs` for
 * another writer, then fails with VAULT_LOCKED. Leftover temp files of crashed
 * writes are swept while the lock is held (no other writer can own them then).
 */
export function withVaultLock<T>(dir: string, fn: () => T, timeoutMs = DEFAULT_TIMEOUT_MS): T {
  const id = resolve(dir);
  if (held.has(id)) return fn();
  const path = join(dir, LOCK_FILE);
  const deadline = Date.now() + timeoutMs;
  while (!tryCreate(path)) {
    const stale = staleStamp(path);
    if (stale !== null) {
      // Two processes may judge the same dead lock stale at once. Re-checking
      // the stamp right before unlinking keeps the second one from removing the
      // fresh lock the first has just created; the window left is the few
      // microseconds between stat and unlink, and losing that race costs at
      // worst one lost update, never a torn file.
      if (stampOf(path) === stale) {
        try {
          unlinkSync(path);
        } catch {
          // Someone else broke or released it first.
        }
      }
      continue;
    }
    if (Date.now() >= deadline) {
      const owner = readOwner(path);
      const who = owner ? `process ${owner.pid} on ${owner.host}` : 'another process';
      throw new VaultError(
        'VAULT_LOCKED',
        `the vault is being changed by ${who}; try again, or if no stash command is running, remove ${path}`,
      );
    }
    sleepSync(POLL_MS);
  }
  held.add(id);
  try {
    sweepTempFiles(dir);
    sweepTempFiles(join(dir, 'containers'));
    sweepTempFiles(join(dir, 'shared'));
    return fn();
  } finally {
    held.delete(id);
    try {
      unlinkSync(path);
    } catch {
      // Already removed by a stale-lock breaker; nothing to release.
    }
  }
}
