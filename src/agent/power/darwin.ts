/**
 * macOS: IORegisterForSystemPower on a CFRunLoop thread (native/macos/power_macos.cc).
 * kIOMessageSystemWillSleep is answered with IOAllowPowerChange only after
 * beforeSleep settled (macOS waits up to 30 s; the bound here is sleepTimeoutMs).
 * kIOMessageCanSystemSleep (idle sleep) is allowed at once in native code.
 * The block lock is a PreventUserIdleSystemSleep assertion: it stops idle sleep,
 * not a lid close or an explicit Sleep, which the WillSleep wipe covers.
 * Not run on the Linux CI: see docs/suspend.md.
 */
import { CallbackDelayPowerIntegration } from './callback-delay.js';

export class IOKitPowerIntegration extends CallbackDelayPowerIntegration {
  readonly backend = 'iokit' as const;
}
