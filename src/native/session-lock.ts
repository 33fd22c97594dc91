/**
 * Typed wrapper over the session lock half of the addon
 * (native/<os>/lock_<os>.cc). Policy (what a lock does, retries, which
 * sources a platform has) lives in src/agent/lock/.
 */
import { NativeError } from '../errors.js';
import { loadBinding, type NativeLockEvent, type NativeLockWatcher } from './binding.js';

export type { NativeLockEvent, NativeLockWatcher } from './binding.js';

/** The lock sources of each platform, as the addon names them. */
export const lockSources = {
  linux: ['logind', 'screensaver'],
  darwin: ['distributed'],
  win32: ['wts'],
} as const satisfies Partial<Record<NodeJS.Platform, readonly string[]>>;

export type LockSourceName = (typeof lockSources)[keyof typeof lockSources][number];

/**
 * Starts watching one lock source: a native thread (Linux: its own bus
 * connection; Windows: a message-only window) or, on macOS, an observer that
 * pump() services. It reports to `callback` on the JS thread, does not keep
 * the process alive by itself, and ends with stop(). `sessionId` (Linux
 * logind): the XDG_SESSION_ID to fall back on when logind knows no session
 * for the agent's pid.
 */
export function watchSessionLock(
  source: LockSourceName,
  sessionId: string | null,
  callback: (event: NativeLockEvent) => void,
): NativeLockWatcher {
  if (typeof callback !== 'function') throw new NativeError('EINVAL', 'watchSessionLock needs a callback');
  const known: readonly string[] =
    (lockSources as Partial<Record<NodeJS.Platform, readonly string[]>>)[process.platform] ?? [];
  if (!known.includes(source)) throw new NativeError('EINVAL', `no lock source ${source} on ${process.platform}`);
  if (
    sessionId !== null &&
    (typeof sessionId !== 'string' || sessionId.length === 0 || sessionId.length > 64 || sessionId.includes('\0'))
  ) {
    throw new NativeError('EINVAL', 'sessionId must be 1..64 characters without NUL');
  }
  const Watcher = loadBinding().LockWatcher;
  if (!Watcher) throw new NativeError('ENOTSUP', 'this build of the addon has no session lock watcher');
  return new Watcher({ source, sessionId }, callback);
}
