/**
 * X11 through xsel (Debian and Homebrew package `xsel`), used when xclip is
 * missing. Like xclip it forks a child that serves the CLIPBOARD selection;
 * `--clear` leaves the selection without an owner. xsel offers no choice of
 * targets, so the copy is not marked as sensitive.
 */
import { check, readResult, runTool, type ClipboardTool } from './tool.js';

export const xsel: ClipboardTool = {
  name: 'xsel',
  programs: ['xsel'],
  install: 'install xclip or xsel (Debian/Ubuntu: apt install xclip; Homebrew: brew install xclip)',
  async copy(value) {
    check(await runTool('xsel', ['--clipboard', '--input'], { input: value }), 'xsel');
    return false;
  },
  async read(limit) {
    return readResult(await runTool('xsel', ['--clipboard', '--output'], { capture: limit }));
  },
  async clear() {
    check(await runTool('xsel', ['--clipboard', '--clear']), 'xsel');
  },
};
