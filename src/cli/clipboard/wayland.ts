/**
 * Wayland through wl-clipboard's wl-copy and wl-paste (Debian and Homebrew
 * package `wl-clipboard`).
 *
 * wl-copy does not keep what it reads from stdin in memory: it writes it to a
 * file, `wl-copy-buffer-XXXXXX/stdin`, to serve every paste from (wl-clipboard
 * src/util/files.c). Up to 2.2 that folder is always in /tmp; from 2.3 it is in
 * $TMPDIR, and 2.3 is also the release that added `--sensitive`. So: with 2.3
 * or later TMPDIR points at XDG_RUNTIME_DIR or /dev/shm (a tmpfs, chosen as
 * for stash's own files by memory-folder.ts), and the copy is marked
 * sensitive; with an older one the copy goes ahead only when /tmp itself is a
 * tmpfs. Debian 12 ships 2.1.0. `--type text/plain` keeps wl-copy from running
 * xdg-mime on the file to guess a type. Clearing copies an empty text, as
 * with xclip (clear() says why not --clear).
 */
import { wipe } from '../../vault/secure.js';
import { check, ClipboardError, readResult, runTool, type ClipboardTool } from './tool.js';
import { inMemory, ownMemoryParent } from '../memory-folder.js';

interface Capabilities {
  /** `--sensitive` (and TMPDIR honoured): wl-clipboard 2.3 or later. */
  sensitive: boolean;
}

let capabilities: Promise<Capabilities> | null = null;

/** What this wl-copy can do, from its --help (it has no machine-readable version). */
function probe(): Promise<Capabilities> {
  capabilities ??= runTool('wl-copy', ['--help'], { capture: 16 * 1024 }).then((r) => {
    const help = (r.output ? r.output.toString('utf8') : '') + r.stderr;
    wipe(r.output);
    return { sensitive: help.includes('--sensitive') };
  });
  return capabilities;
}

/** Where wl-copy will put its file, and the environment that sends it there; refuses a folder on disk. */
function bufferFolder(caps: Capabilities): NodeJS.ProcessEnv {
  // The folder memory-folder.ts chooses for stash's own files: XDG_RUNTIME_DIR, else /dev/shm.
  const parent = caps.sensitive ? ownMemoryParent().parent : null;
  if (parent !== null) return { ...process.env, TMPDIR: parent };
  if (inMemory(caps.sensitive ? process.env.TMPDIR || '/tmp' : '/tmp') === true) return process.env;
  throw new ClipboardError(
    caps.sensitive
      ? 'wl-copy writes what it copies to a file in $TMPDIR, and none of XDG_RUNTIME_DIR, /dev/shm and TMPDIR (or /tmp) is a tmpfs here; nothing was copied'
      : 'this wl-copy (wl-clipboard before 2.3) writes what it copies to a file in /tmp, which is not a tmpfs here; nothing was copied. ' +
          'Install wl-clipboard 2.3 or later, mount /tmp as a tmpfs, or use the X11 clipboard through Xwayland (STASH_CLIPBOARD=xclip)',
  );
}

export const wayland: ClipboardTool = {
  name: 'wl-clipboard',
  programs: ['wl-copy', 'wl-paste'],
  install: 'install wl-clipboard (Debian/Ubuntu: apt install wl-clipboard; Homebrew: brew install wl-clipboard)',
  async copy(value) {
    const caps = await probe();
    const env = bufferFolder(caps);
    const args = ['--type', 'text/plain;charset=utf-8', ...(caps.sensitive ? ['--sensitive'] : [])];
    // No wait for the value to be served: wl-copy forks only once the compositor has set its selection.
    check(await runTool('wl-copy', args, { input: value, env }), 'wl-copy');
    return caps.sensitive;
  },
  async read(limit) {
    return readResult(await runTool('wl-paste', ['--no-newline'], { capture: limit }));
  },
  async clear() {
    // An empty copy, not --clear: weston ignores wl-clipboard 2.1's --clear (it answers 0 and the value stays).
    // Nothing secret goes through wl-copy's file here, wherever it is.
    check(await runTool('wl-copy', ['--type', 'text/plain;charset=utf-8'], { input: Buffer.alloc(0) }), 'wl-copy');
  },
};
