/**
 * X11 through xsel (Debian and Homebrew package `xsel`), used when xclip is
 * missing. Like xclip it forks a child that serves the CLIPBOARD selection,
 * but it forks first and takes the selection after its parent has exited:
 * copy waits until the clipboard holds the value, or a paste right after the
 * command (or the helper's own check before it clears) finds the old one.
 * `--clear` leaves the selection without an owner. xsel offers no choice of
 * targets, so the copy is not marked as sensitive.
 */
import { check, readResult, runTool, untilServed, type ClipboardTool } from './tool.js';

export const xsel: ClipboardTool = {
  name: 'xsel',
  programs: ['xsel'],
  install: 'install xclip or xsel (Debian/Ubuntu: apt install xclip; Homebrew: brew install xclip)',
  async copy(value, stop) {
    check(await runTool('xsel', ['--clipboard', '--input'], { input: value }), 'xsel');
    await untilServed(xsel, value, stop);
    return false;
  },
  async read(limit) {
    return readResult(await runTool('xsel', ['--clipboard', '--output'], { capture: limit }));
  },
  async clear() {
    check(await runTool('xsel', ['--clipboard', '--clear']), 'xsel');
  },
};
