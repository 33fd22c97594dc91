/**
 * macOS through pbcopy and pbpaste, which come with the system. LANG is set
 * for them so that UTF-8 text is neither re-encoded nor mangled. pbcopy
 * writes plain text only: it cannot add org.nspasteboard.ConcealedType, so
 * the copy is not marked as sensitive. Not run on this project's CI (no Mac).
 */
import { check, readResult, runTool, type ClipboardTool } from './tool.js';

const env = (): NodeJS.ProcessEnv => ({ ...process.env, LANG: 'en_US.UTF-8', LC_ALL: 'en_US.UTF-8' });

export const macos: ClipboardTool = {
  name: 'pbcopy',
  programs: ['pbcopy', 'pbpaste'],
  install: 'pbcopy and pbpaste are part of macOS (/usr/bin); check PATH',
  async copy(value) {
    check(await runTool('pbcopy', [], { input: value, env: env() }), 'pbcopy');
    return false;
  },
  async read(limit) {
    return readResult(await runTool('pbpaste', [], { capture: limit, env: env() }));
  },
  async clear() {
    check(await runTool('pbcopy', [], { input: Buffer.alloc(0), env: env() }), 'pbcopy');
  },
};
