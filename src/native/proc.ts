/**
 * Typed wrappers over the process-identity half of the addon
 * (native/<os>/proc_<os>.cc): pidfds on Linux, processInfo on macOS and
 * Windows. Arguments are checked here, before the native call; native
 * failures keep their errno `code`. Policy lives in src/agent/proc-info/.
 */
import { constants } from 'node:os';
import { NativeError } from '../errors.js';
import { checkInt } from './check-args.js';
import { loadBinding, type NativeProcessInfo } from './binding.js';

export type { NativeProcessInfo } from './binding.js';

/** macOS/Windows: parent pid, start time and whether it is a zombie, of `pid`; null when there is no such process. */
export function nativeProcessInfo(pid: number): NativeProcessInfo | null {
  checkInt('pid', pid, 1);
  const binding = loadBinding();
  if (!binding.processInfo)
    throw new NativeError('ENOTSUP', 'processInfo is provided on macOS and Windows; Linux reads /proc');
  return binding.processInfo(pid);
}

/** Linux: whether this build has pidfd support (the kernel may still answer ENOSYS). */
export function havePidfd(): boolean {
  const binding = loadBinding();
  return typeof binding.pidfdOpen === 'function' && typeof binding.pidfdSendSignal === 'function';
}

/** Linux: a pidfd for `pid` (O_CLOEXEC). Close it with fs.closeSync. Throws ESRCH when there is no such process. */
export function pidfdOpen(pid: number): number {
  checkInt('pid', pid, 1);
  const binding = loadBinding();
  if (!binding.pidfdOpen) throw new NativeError('ENOTSUP', 'pidfd is Linux only');
  return binding.pidfdOpen(pid);
}

/** Linux: sends `signal` to the process a pidfd names (never to a later process with the same pid). */
export function pidfdSendSignal(fd: number, signal: NodeJS.Signals): void {
  checkInt('fd', fd, 0);
  const number = constants.signals[signal];
  if (number === undefined) throw new NativeError('EINVAL', `unknown signal: ${String(signal)}`);
  const binding = loadBinding();
  if (!binding.pidfdSendSignal) throw new NativeError('ENOTSUP', 'pidfd is Linux only');
  binding.pidfdSendSignal(fd, number);
}
