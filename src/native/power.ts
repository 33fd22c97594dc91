/**
 * Typed wrappers over the power half of the addon (native/<os>/power_<os>.cc).
 * Arguments are checked here, before the native call; native failures keep
 * their errno (or WIN32_<n>) `code`. Policy lives in src/agent/power/.
 */
import { NativeError } from '../errors.js';
import { checkInt } from './check-args.js';
import { loadBinding, type NativePowerEvent, type NativePowerProbe, type NativePowerWatcher } from './binding.js';

export type { NativePowerEvent, NativePowerProbe, NativePowerWatcher } from './binding.js';

export type InhibitMode = 'block' | 'delay';

/** logind's inhibitor lock types (man org.freedesktop.login1, "Inhibit"). */
const inhibitWhat = new Set([
  'shutdown',
  'sleep',
  'idle',
  'handle-power-key',
  'handle-suspend-key',
  'handle-hibernate-key',
  'handle-lid-switch',
]);

function checkText(name: string, value: string): void {
  if (typeof value !== 'string' || value.length === 0 || value.length > 256 || value.includes('\0')) {
    throw new NativeError('EINVAL', `${name} must be 1..256 characters without NUL`);
  }
}

/** Whether the platform's power backend can be used right now, and if not, why. Never rejects for "absent". */
export function powerProbe(): Promise<NativePowerProbe> {
  return loadBinding().powerProbe();
}

/**
 * Takes an inhibitor. Linux: logind Manager.Inhibit, resolves with the lock fd
 * (close it with powerRelease to drop the lock). macOS/Windows: `mode` must be
 * 'block'; resolves with an assertion/request id.
 */
export function powerInhibit(opts: { what: string; who: string; why: string; mode: InhibitMode }): Promise<number> {
  for (const part of opts.what.split(':')) {
    if (!inhibitWhat.has(part)) return Promise.reject(new NativeError('EINVAL', `unknown inhibitor type: ${part}`));
  }
  if (opts.mode !== 'block' && opts.mode !== 'delay')
    return Promise.reject(new NativeError('EINVAL', `unknown inhibitor mode: ${String(opts.mode)}`));
  try {
    checkText('who', opts.who);
    checkText('why', opts.why);
  } catch (err) {
    return Promise.reject(err);
  }
  return loadBinding().powerInhibit(opts.what, opts.who, opts.why, opts.mode);
}

/** Drops an inhibitor taken by powerInhibit. The caller must forget the handle first: a closed fd number is reused. */
export function powerRelease(handle: number): void {
  checkInt('handle', handle, 0);
  loadBinding().powerRelease(handle);
}

/**
 * Starts the platform's sleep watcher: a native thread (Linux: its own system-bus
 * connection; macOS: a CFRunLoop thread; Windows: a power callback) that reports
 * to `callback` on the JS thread. It does not keep the process alive by itself;
 * call stop() to end it.
 */
export function watchPower(callback: (event: NativePowerEvent) => void): NativePowerWatcher {
  if (typeof callback !== 'function') throw new NativeError('EINVAL', 'watchPower needs a callback');
  const Watcher = loadBinding().PowerWatcher;
  return new Watcher(callback);
}
