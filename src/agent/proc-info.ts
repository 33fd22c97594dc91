/**
 * Process identity for the activity registry: parent pid and start time, and
 * "signal this process only if it is still the one we recorded".
 *
 * A pid alone does not name a process: after it exits, the number is reused.
 * The start time does (pid + start time is unique for the life of the boot),
 * so every decision about a registered pid re-checks it.
 *
 * - Linux: /proc/<pid>/stat (ppid = field 4, starttime = field 22, in clock
 *   ticks since boot). Signals go through a pidfd opened BEFORE the start time
 *   is re-checked, so the signal cannot reach a process that took the pid
 *   after the check (native/linux/proc_linux.cc).
 * - macOS, Windows: the addon's processInfo (sysctl KERN_PROC_PID; process
 *   creation time + Toolhelp parent pid), then process.kill. There a pid could
 *   in theory be reused between the check and the kill (microseconds);
 *   docs/suspend.md discusses it.
 */
import { closeSync, readdirSync, readFileSync } from 'node:fs';
import { StashError, errorCode } from '../errors.js';
import { havePidfd, nativeProcessInfo, pidfdOpen, pidfdSendSignal } from '../native/power.js';

export interface ProcInfo {
  pid: number;
  ppid: number;
  /** Opaque; compare for equality only (Linux: clock ticks since boot, as a decimal string). */
  startTime: string;
  /** Exited but not yet reaped: no longer running, and never to be signalled. */
  zombie: boolean;
  /** Its session id (Linux only: field 6 of /proc/<pid>/stat). */
  session?: number;
}

/** /proc/<pid>/stat could be read but not understood. */
export class ProcInfoError extends StashError {}

const digits = /^\d+$/;

/**
 * Parses the text of /proc/<pid>/stat. The command name (field 2) is in
 * parentheses and may itself contain spaces and parentheses, so the fields are
 * counted from the LAST ')'.
 */
export function parseProcStat(pid: number, text: string): ProcInfo {
  const close = text.lastIndexOf(')');
  if (close < 0 || text.indexOf('(') < 0 || text.indexOf('(') > close) {
    throw new ProcInfoError('PROC_BAD_STAT', `/proc/${pid}/stat has no "(comm)" field`);
  }
  // After ") " come fields 3 (state), 4 (ppid), 5 (pgrp), 6 (session), ... 22 (starttime).
  const rest = text
    .slice(close + 1)
    .trim()
    .split(/\s+/);
  const state = rest[0];
  const ppid = rest[1];
  const session = rest[3];
  const start = rest[19];
  if (
    state === undefined ||
    !/^[A-Za-z]$/.test(state) ||
    ppid === undefined ||
    !digits.test(ppid) ||
    session === undefined ||
    !digits.test(session) ||
    start === undefined ||
    !digits.test(start)
  ) {
    throw new ProcInfoError('PROC_BAD_STAT', `/proc/${pid}/stat has unexpected fields`);
  }
  return {
    pid,
    ppid: Number(ppid),
    startTime: start,
    zombie: state === 'Z' || state === 'X' || state === 'x',
    session: Number(session),
  };
}

/**
 * The processes in session `sid` (Linux, from /proc; none elsewhere). The
 * kernel never gives a new process the id of a session that still has a
 * process in it, so these are what that session's leader left running.
 */
export function sessionMembers(sid: number): ProcInfo[] {
  if (process.platform !== 'linux' || !Number.isInteger(sid) || sid <= 0) return [];
  let names: string[];
  try {
    names = readdirSync('/proc');
  } catch {
    return [];
  }
  const members: ProcInfo[] = [];
  for (const name of names) {
    if (!digits.test(name)) continue;
    try {
      const info = readProcInfo(Number(name));
      if (info !== null && info.session === sid) members.push(info);
    } catch {
      /* gone meanwhile, or a stat that cannot be parsed: not one to signal */
    }
  }
  return members;
}

/** Identity of `pid`, or null when there is no such process (or it cannot be seen). */
export function readProcInfo(pid: number): ProcInfo | null {
  if (!Number.isInteger(pid) || pid <= 0) return null;
  if (process.platform === 'linux') {
    let text: string;
    try {
      text = readFileSync(`/proc/${pid}/stat`, 'latin1');
    } catch (err) {
      const code = errorCode(err);
      if (code === 'ENOENT' || code === 'ESRCH' || code === 'EACCES') return null;
      throw err;
    }
    return parseProcStat(pid, text);
  }
  if (process.platform === 'darwin' || process.platform === 'win32') {
    const info = nativeProcessInfo(pid);
    return info ? { pid, ...info } : null;
  }
  throw new ProcInfoError('ENOTSUP', `process identity is not implemented on ${process.platform}`);
}

/** True when `pid` is running and still the process that had `startTime`. */
export function isSameProcess(
  pid: number,
  startTime: string,
  read: (pid: number) => ProcInfo | null = readProcInfo,
): boolean {
  const info = read(pid);
  return info !== null && !info.zombie && info.startTime === startTime;
}

/**
 * True when `ancestor` is `pid` itself or one of its ancestors, walking parent
 * pids (bounded: a loop or a very deep tree answers false).
 */
export function isSelfOrDescendant(
  pid: number,
  ancestor: number,
  read: (pid: number) => ProcInfo | null = readProcInfo,
  maxDepth = 512,
): boolean {
  let current = pid;
  let child: ProcInfo | null = null;
  for (let depth = 0; depth < maxDepth; depth++) {
    if (current === ancestor) return true;
    const info = read(current);
    if (info === null) return false;
    // Windows does not re-parent orphans: a recorded parent pid may have been
    // reused by a process that started after the child; such a link is broken.
    if (process.platform === 'win32' && child !== null && BigInt(info.startTime) > BigInt(child.startTime))
      return false;
    if (info.ppid <= 0 || info.ppid === current) return false;
    child = info;
    current = info.ppid;
  }
  return false;
}

export type SignalResult = 'signalled' | 'gone';

/**
 * Sends `signal` to `pid` only if it is still the process that had
 * `startTime`; 'gone' when it exited or the pid now names another process.
 */
export function signalIfSame(pid: number, startTime: string, signal: NodeJS.Signals): SignalResult {
  if (process.platform === 'linux' && havePidfd()) {
    let fd: number;
    try {
      fd = pidfdOpen(pid);
    } catch (err) {
      const code = errorCode(err);
      if (code === 'ESRCH' || code === 'EINVAL') return 'gone';
      if (code !== 'ENOSYS' && code !== 'EPERM') throw err;
      return signalByPid(pid, startTime, signal); // kernel < 5.3, or a seccomp filter
    }
    try {
      // The pidfd was opened first: if the start time still matches now, the
      // pidfd names the recorded process, whatever happens to the pid next.
      if (!isSameProcess(pid, startTime)) return 'gone';
      pidfdSendSignal(fd, signal);
      return 'signalled';
    } catch (err) {
      if (errorCode(err) === 'ESRCH') return 'gone';
      throw err;
    } finally {
      closeSync(fd);
    }
  }
  return signalByPid(pid, startTime, signal);
}

function signalByPid(pid: number, startTime: string, signal: NodeJS.Signals): SignalResult {
  if (!isSameProcess(pid, startTime)) return 'gone';
  try {
    process.kill(pid, signal);
    return 'signalled';
  } catch (err) {
    if (errorCode(err) === 'ESRCH') return 'gone';
    throw err;
  }
}
