/**
 * Linux: /proc/<pid>/stat (ppid = field 4, session = field 6, starttime =
 * field 22, in clock ticks since boot). Signals go through a pidfd opened
 * BEFORE the start time is re-checked, so the signal cannot reach a process
 * that took the pid after the check (native/linux/proc_linux.cc); by pid where
 * the kernel (< 5.3) or a seccomp filter has no pidfd.
 */
import { closeSync, readdirSync, readFileSync } from 'node:fs';
import { errorCode } from '../../errors.js';
import { havePidfd, pidfdOpen, pidfdSendSignal } from '../../native/proc.js';
import {
  isPid,
  isSameProcess,
  ProcInfoError,
  signalByPid,
  type ProcessTable,
  type ProcInfo,
  type SignalResult,
} from './process-table.js';

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

function read(pid: number): ProcInfo | null {
  if (!isPid(pid)) return null;
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

/**
 * The kernel never gives a new process the id of a session that still has a
 * process in it, so these are what that session's leader left running.
 */
function sessionMembers(sid: number): ProcInfo[] {
  if (!Number.isInteger(sid) || sid <= 0) return [];
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
      const info = read(Number(name));
      if (info !== null && info.session === sid) members.push(info);
    } catch {
      /* gone meanwhile, or a stat that cannot be parsed: not one to signal */
    }
  }
  return members;
}

function signalIfSame(pid: number, startTime: string, signal: NodeJS.Signals): SignalResult {
  if (!havePidfd()) return signalByPid(read, pid, startTime, signal);
  let fd: number;
  try {
    fd = pidfdOpen(pid);
  } catch (err) {
    const code = errorCode(err);
    if (code === 'ESRCH' || code === 'EINVAL') return 'gone';
    if (code !== 'ENOSYS' && code !== 'EPERM') throw err;
    return signalByPid(read, pid, startTime, signal); // kernel < 5.3, or a seccomp filter
  }
  try {
    // The pidfd was opened first: if the start time still matches now, the
    // pidfd names the recorded process, whatever happens to the pid next.
    if (!isSameProcess(pid, startTime, read)) return 'gone';
    pidfdSendSignal(fd, signal);
    return 'signalled';
  } catch (err) {
    if (errorCode(err) === 'ESRCH') return 'gone';
    throw err;
  } finally {
    closeSync(fd);
  }
}

export const linuxProcessTable: ProcessTable = { read, sessionMembers, signalIfSame, parentMayBeNewer: false };
