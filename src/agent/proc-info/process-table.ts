/**
 * The one shape of process identity, which each OS implements in a module of
 * its own (linux.ts, darwin.ts, win32.ts, none.ts; index.ts picks one).
 *
 * A pid alone does not name a process: after it exits, the number is reused.
 * The start time does (pid + start time is unique for the life of the boot),
 * so every decision about a registered pid re-checks it.
 */
import { StashError, errorCode } from '../../errors.js';
import { nativeProcessInfo } from '../../native/proc.js';

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

/** /proc/<pid>/stat could be read but not understood, or this OS has no process identity. */
export class ProcInfoError extends StashError {}

export type SignalResult = 'signalled' | 'gone';

/** Process identity on one OS. */
export interface ProcessTable {
  /** Identity of `pid`, or null when there is no such process, it cannot be seen, or `pid` is no pid (isPid). */
  read(pid: number): ProcInfo | null;
  /** The processes in session `sid`; none where the OS does not tell. */
  sessionMembers(sid: number): ProcInfo[];
  /**
   * Sends `signal` to `pid` only if it is still the process that had
   * `startTime`; 'gone' when it exited or the pid now names another process.
   */
  signalIfSame(pid: number, startTime: string, signal: NodeJS.Signals): SignalResult;
  /**
   * Whether a parent pid may name a process that started after the child:
   * Windows does not re-parent orphans, so a recorded parent pid may have been
   * reused meanwhile, and such a link is broken.
   */
  readonly parentMayBeNewer: boolean;
}

/** Whether `pid` can name a process at all: a positive whole number. */
export function isPid(pid: number): boolean {
  return Number.isInteger(pid) && pid > 0;
}

/** True when `pid` is running and still the process that had `startTime`. */
export function isSameProcess(pid: number, startTime: string, read: (pid: number) => ProcInfo | null): boolean {
  const info = read(pid);
  return info !== null && !info.zombie && info.startTime === startTime;
}

/**
 * Checks the start time, then signals by pid: where there is no pidfd, a pid
 * could in theory be reused between the check and the kill (microseconds);
 * docs/suspend.md discusses it.
 */
export function signalByPid(
  read: (pid: number) => ProcInfo | null,
  pid: number,
  startTime: string,
  signal: NodeJS.Signals,
): SignalResult {
  if (!isSameProcess(pid, startTime, read)) return 'gone';
  try {
    process.kill(pid, signal);
    return 'signalled';
  } catch (err) {
    if (errorCode(err) === 'ESRCH') return 'gone';
    throw err;
  }
}

/** Identity from the addon's processInfo (macOS: sysctl; Windows: creation time and Toolhelp). */
function readThroughAddon(pid: number): ProcInfo | null {
  if (!isPid(pid)) return null;
  const info = nativeProcessInfo(pid);
  return info ? { pid, ...info } : null;
}

/**
 * The table of macOS and Windows: identity from the addon, signals by pid (no
 * pidfd there), no session listing. They differ only in `parentMayBeNewer`.
 */
export function addonProcessTable(parentMayBeNewer: boolean): ProcessTable {
  return {
    read: readThroughAddon,
    sessionMembers: () => [],
    signalIfSame: (pid, startTime, signal) => signalByPid(readThroughAddon, pid, startTime, signal),
    parentMayBeNewer,
  };
}
