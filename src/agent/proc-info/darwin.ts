/**
 * macOS: identity from the addon's processInfo (sysctl KERN_PROC_PID,
 * native/macos/proc_macos.cc), then process.kill: there is no pidfd, so a pid
 * could in theory be reused between the check and the kill (microseconds;
 * docs/suspend.md). macOS re-parents orphans (to launchd), so a parent pid
 * never names a process newer than its child. No session listing.
 */
import { addonProcessTable } from './process-table.js';

export const darwinProcessTable = addonProcessTable(false);
