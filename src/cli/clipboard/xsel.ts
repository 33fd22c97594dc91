/**
 * X11 through xsel (Debian and Homebrew package `xsel`), used when xclip is
 * missing. Like xclip it forks a child that serves the CLIPBOARD selection,
 * but it forks first and takes the selection after its parent has exited:
 * copy waits until the clipboard holds the value, or a paste right after the
 * command (or the helper's own check before it clears) finds the old one.
 * `--clear` leaves the selection without an owner. xsel offers no choice of
 * targets, so the copy is not marked as sensitive.
 */
import { constantTimeEqual, wipe } from '../../vault/secure.js';
import { check, ClipboardError, readResult, runTool, type ClipboardTool } from './tool.js';

/** How long xsel's detached child may take to own the selection (a loaded machine took over 100 ms). */
const OWN_TIMEOUT_MS = 5000;
const POLL_MS = 25;

export const xsel: ClipboardTool = {
  name: 'xsel',
  programs: ['xsel'],
  install: 'install xclip or xsel (Debian/Ubuntu: apt install xclip; Homebrew: brew install xclip)',
  async copy(value) {
    check(await runTool('xsel', ['--clipboard', '--input'], { input: value }), 'xsel');
    const deadline = Date.now() + OWN_TIMEOUT_MS;
    for (;;) {
      const now = await xsel.read(value.length);
      const holds = now !== null && constantTimeEqual(now, value);
      wipe(now);
      if (holds) return false;
      if (Date.now() >= deadline) {
        throw new ClipboardError(`xsel did not put the value on the clipboard within ${OWN_TIMEOUT_MS / 1000} s`);
      }
      await new Promise((r) => setTimeout(r, POLL_MS));
    }
  },
  async read(limit) {
    return readResult(await runTool('xsel', ['--clipboard', '--output'], { capture: limit }));
  },
  async clear() {
    check(await runTool('xsel', ['--clipboard', '--clear']), 'xsel');
  },
};
