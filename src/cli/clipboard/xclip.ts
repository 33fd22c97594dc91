/**
 * X11 through xclip (Debian and Homebrew package `xclip`). The CLIPBOARD
 * selection, the one Ctrl-V pastes. xclip forks a child that serves the
 * selection until another client takes it; "clearing" takes it with an empty
 * string, and that child exits. xclip 0.13 offers one target per copy, so the
 * copy cannot carry KDE's x-kde-passwordManagerHint next to the text: it is
 * not marked as sensitive.
 */
import { check, readResult, runTool, untilServed, type ClipboardTool } from './tool.js';

const selection = ['-selection', 'clipboard'];

export const xclip: ClipboardTool = {
  name: 'xclip',
  programs: ['xclip'],
  install: 'install xclip (Debian/Ubuntu: apt install xclip; Homebrew: brew install xclip) or xsel',
  async copy(value, stop) {
    check(await runTool('xclip', [...selection, '-in'], { input: value }), 'xclip');
    await untilServed(xclip, value, stop);
    return false;
  },
  async read(limit) {
    return readResult(await runTool('xclip', [...selection, '-out'], { capture: limit }));
  },
  async clear() {
    check(await runTool('xclip', [...selection, '-in'], { input: Buffer.alloc(0) }), 'xclip');
  },
};
