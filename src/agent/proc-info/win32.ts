/**
 * Windows: identity from the addon's processInfo (the creation time, and the
 * parent pid from a Toolhelp snapshot; native/windows/proc_windows.cc), then
 * process.kill, as on macOS. Windows does not re-parent orphans: a recorded
 * parent pid may since name a newer process, so a parent that started after
 * its child is no parent (parentMayBeNewer). No session listing.
 */
import { addonProcessTable } from './process-table.js';

export const windowsProcessTable = addonProcessTable(true);
