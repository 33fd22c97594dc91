/**
 * One autostart at a time per user. Two first commands in the same socket
 * folder would each be safe without it (the agents settle on one owner of
 * the socket, listener.ts), but a command with XDG_RUNTIME_DIR set and one
 * without it name different folders: both would find no agent and each start
 * one. So the command that starts an agent holds a lock file in a folder
 * every environment of the user names alike (autostartLockDir), and one that
 * waited for it looks for an agent again before starting its own.
 *
 * The lock file holds its holder's pid: a holder that died (Ctrl-C at the
 * first command) leaves a file the next command removes at once. A holder
 * that never lets go is waited for only until the caller's deadline.
 */
import { closeSync, lstatSync, openSync, readFileSync, unlinkSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { checkAgentDir, ensureAgentDir, runUserDir, type Endpoint } from './paths.js';

const LOCK_NAME = 'autostart.lock';
/** A lock older than this is a leftover whatever its pid says (the pid may have been reused). */
const STALE_MS = 30_000;

export interface AutostartLock {
  release(): void;
}

/**
 * Where the lock lives: the socket folder STASH_SESSION_AGENT_DIR names when
 * it is set; else the uid's runtime folder's stash/ when that runtime folder
 * is there (ours, 0700), else the fallback folder. Every environment of the
 * user picks the same one, whatever its XDG_RUNTIME_DIR.
 */
export function autostartLockDir(candidates: Endpoint[], env: NodeJS.ProcessEnv = process.env): Endpoint | null {
  const own = candidates[0];
  if (!own?.dir) return null;
  if (own.source === 'STASH_SESSION_AGENT_DIR') return own;
  const runUser = checkAgentDir(runUserDir(env));
  const source = runUser.exists && runUser.ok ? 'run-user' : 'tmpdir';
  return candidates.find((e) => e.source === source) ?? own;
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** True when the lock file at `path` (inode `ino`) was left by a holder that is gone, and is still that file. */
function stale(path: string, ino: number, mtimeMs: number): boolean {
  let gone = Date.now() - mtimeMs > STALE_MS;
  if (!gone) {
    let text: string;
    try {
      text = readFileSync(path, 'utf8');
    } catch {
      return false; // gone already: the next attempt takes it
    }
    const pid = Number(text.trim());
    // An empty file: its holder is between create and write; only age makes it stale.
    gone = Number.isInteger(pid) && pid > 0 && !alive(pid);
  }
  // Another waiter may have removed it and taken the lock meanwhile: that new file is not stale.
  return gone && lstatSync(path, { throwIfNoEntry: false })?.ino === ino;
}

function tryCreate(path: string): AutostartLock | null {
  const fd = openSync(path, 'wx', 0o600);
  try {
    writeSync(fd, `${process.pid}\n`);
  } finally {
    closeSync(fd);
  }
  const { ino } = lstatSync(path);
  return {
    release() {
      // Only our own file: a waiter that judged ours stale may have replaced it (a holder slower than STALE_MS).
      if (lstatSync(path, { throwIfNoEntry: false })?.ino !== ino) return;
      try {
        unlinkSync(path);
      } catch {
        /* gone already */
      }
    },
  };
}

/**
 * Takes the autostart lock in `where`'s folder (created 0700 if need be),
 * waiting until `deadline` while a live command holds it. Null when it could
 * not be had by then, or the folder is unsafe: the caller starts its agent
 * anyway, and the socket's own claim keeps one agent per folder.
 */
export async function takeAutostartLock(where: Endpoint | null, deadline: number): Promise<AutostartLock | null> {
  if (!where?.dir) return null;
  try {
    ensureAgentDir({ dir: where.dir, source: where.source });
  } catch {
    return null;
  }
  const path = join(where.dir, LOCK_NAME);
  for (let delay = 10; ; delay = Math.min(delay * 2, 100)) {
    try {
      return tryCreate(path);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') return null;
    }
    const st = lstatSync(path, { throwIfNoEntry: false });
    if (st && stale(path, st.ino, st.mtimeMs)) {
      try {
        unlinkSync(path);
      } catch {
        /* another waiter removed it first */
      }
      continue;
    }
    if (Date.now() >= deadline) return null;
    await sleep(delay);
  }
}
