/**
 * Any other OS: no process identity. Reading one is an ENOTSUP error, so the
 * activity registry refuses what it could not check later; no session listing.
 */
import { isPid, ProcInfoError, signalByPid, type ProcessTable, type ProcInfo } from './process-table.js';

/** The table of an OS stash has no process identity for. */
export function unsupportedProcessTable(platform: NodeJS.Platform): ProcessTable {
  const read = (pid: number): ProcInfo | null => {
    if (!isPid(pid)) return null;
    throw new ProcInfoError('ENOTSUP', `process identity is not implemented on ${platform}`);
  };
  return {
    read,
    sessionMembers: () => [],
    signalIfSame: (pid, startTime, signal) => signalByPid(read, pid, startTime, signal),
    parentMayBeNewer: false,
  };
}
