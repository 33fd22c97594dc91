/**
 * Process identity for the activity registry: parent pid and start time, and
 * "signal this process only if it is still the one we recorded". One module
 * per OS behind one shape (process-table.ts), picked here and nowhere else, as
 * src/agent/power/ does:
 *
 * - Linux (linux.ts): /proc/<pid>/stat, signals through a pidfd.
 * - macOS (darwin.ts), Windows (win32.ts): the addon's processInfo, then
 *   process.kill.
 * - elsewhere (none.ts): no process identity (ENOTSUP).
 */
import { darwinProcessTable } from './darwin.js';
import { linuxProcessTable } from './linux.js';
import { unsupportedProcessTable } from './none.js';
import { isSameProcess as sameProcess, type ProcessTable, type ProcInfo, type SignalResult } from './process-table.js';
import { windowsProcessTable } from './win32.js';

export { parseProcStat } from './linux.js';
export { ProcInfoError } from './process-table.js';
export type { ProcInfo, ProcessTable, SignalResult } from './process-table.js';

/** The process table of `platform`. */
export function processTableFor(platform: NodeJS.Platform): ProcessTable {
  switch (platform) {
    case 'linux':
      return linuxProcessTable;
    case 'darwin':
      return darwinProcessTable;
    case 'win32':
      return windowsProcessTable;
    default:
      return unsupportedProcessTable(platform);
  }
}

const table = processTableFor(process.platform);

/** Identity of `pid`, or null when there is no such process (or it cannot be seen). */
export function readProcInfo(pid: number): ProcInfo | null {
  return table.read(pid);
}

/**
 * The processes in session `sid` (Linux, from /proc; none elsewhere): what
 * that session's leader left running.
 */
export function sessionMembers(sid: number): ProcInfo[] {
  return table.sessionMembers(sid);
}

/** True when `pid` is running and still the process that had `startTime`. */
export function isSameProcess(
  pid: number,
  startTime: string,
  read: (pid: number) => ProcInfo | null = readProcInfo,
): boolean {
  return sameProcess(pid, startTime, read);
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
    // A parent that started after its child took a reused pid (Windows: parentMayBeNewer).
    if (table.parentMayBeNewer && child !== null && BigInt(info.startTime) > BigInt(child.startTime)) return false;
    if (info.ppid <= 0 || info.ppid === current) return false;
    child = info;
    current = info.ppid;
  }
  return false;
}

/**
 * Sends `signal` to `pid` only if it is still the process that had
 * `startTime`; 'gone' when it exited or the pid now names another process.
 */
export function signalIfSame(pid: number, startTime: string, signal: NodeJS.Signals): SignalResult {
  return table.signalIfSame(pid, startTime, signal);
}
