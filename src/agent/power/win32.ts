/**
 * Windows: PowerRegisterSuspendResumeNotification(DEVICE_NOTIFY_CALLBACK)
 * (native/windows/power_windows.cc). On PBT_APMSUSPEND the native callback
 * reports the suspend and waits, at most 1.8 s (Windows allows suspend
 * callbacks about 2 s), for allowSleep(id), which this class sends once
 * beforeSleep settled. The block lock is a PowerRequestSystemRequired request.
 * Compile-checked with mingw-w64 on the Linux CI, not run: see docs/suspend.md.
 */
import { CallbackDelayPowerIntegration } from './callback-delay.js';
import type { PowerOptions } from './power-integration.js';

export class WindowsPowerIntegration extends CallbackDelayPowerIntegration {
  readonly backend = 'windows' as const;

  constructor(opts: PowerOptions = {}) {
    // The native wait gives up at 1.8 s; waiting longer in JS would answer a callback that is gone.
    super({ ...opts, sleepTimeoutMs: Math.min(opts.sleepTimeoutMs ?? 1500, 1700) });
  }
}
