/**
 * The session lock integration of the agent: which lock sources this platform
 * has, picked here and nowhere else (the policy is in ./session-lock.ts).
 *
 *   const lock = createSessionLock({ enabled: config.lockOnScreenLock.value });
 *   lock.start({ onLock: () => agent.sessionLocked(), log });
 *   ... if (lock.locked) refuse to cache ...
 *   lock.stop();
 */
import { errorMessage } from '../../errors.js';
import { loadBinding } from '../../native/binding.js';
import { lockSources, type LockSourceName } from '../../native/session-lock.js';
import { SessionLockIntegration, type SessionLockOptions } from './session-lock.js';

export { SessionLockIntegration } from './session-lock.js';
export type { LockSourceStatus, SessionLockHooks, SessionLockStatus } from './session-lock.js';

/**
 * macOS delivers distributed notifications only to the main thread's run loop,
 * which Node never runs: the JS thread services it this often, which bounds
 * the latency of a lock there (docs/suspend.md).
 */
export const MAC_PUMP_MS = 250;

/**
 * Linux: logind (the agent's session) and the session bus screensaver; macOS:
 * the com.apple.screenIsLocked distributed notification; Windows:
 * WTS_SESSION_LOCK. With `enabled` false, or without the addon, nothing is
 * watched and status() says why. Never throws.
 */
export function createSessionLock(
  opts: { enabled: boolean; env?: NodeJS.ProcessEnv; platform?: NodeJS.Platform } & Pick<
    SessionLockOptions,
    'retryMinMs' | 'retryMaxMs'
  >,
): SessionLockIntegration {
  const { enabled, env = process.env, platform = process.platform, ...rest } = opts;
  if (!enabled)
    return new SessionLockIntegration({
      sources: [],
      enabled: false,
      reason: 'agent.lock_on_screen_lock is off: keys stay cached while the session is locked',
    });
  const sources: readonly LockSourceName[] | undefined = (
    lockSources as Partial<Record<NodeJS.Platform, readonly LockSourceName[]>>
  )[platform];
  if (!sources)
    return new SessionLockIntegration({ sources: [], reason: `no session lock notification on ${platform}` });
  try {
    loadBinding();
  } catch (err) {
    return new SessionLockIntegration({ sources: [], reason: errorMessage(err) });
  }
  return new SessionLockIntegration({
    ...rest,
    sources: [...sources],
    sessionId: env.XDG_SESSION_ID ? env.XDG_SESSION_ID : null,
    pumpMs: platform === 'darwin' ? MAC_PUMP_MS : null,
  });
}
