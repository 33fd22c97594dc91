/**
 * Prompts on the controlling terminal (/dev/tty), not on stdin/stdout, so they
 * work while stdin or stdout are redirected (`stash get x y > file`). Hidden
 * input is read in raw mode (no echo) byte by byte straight into sodium secure
 * memory; each chunk Node hands us is zeroed once copied. On Windows the
 * console (CONIN$) is asked instead, through the addon (prompt-console.ts).
 */
import { closeSync, constants, openSync, readSync, writeSync } from 'node:fs';
import { StashError } from '../errors.js';
import { secureAlloc, wipe } from '../vault/secure.js';
import { askLineConsole, haveConsole, promptHiddenConsole } from './prompt-console.js';

/** Thrown when a prompt is needed but the process has no terminal. */
export class NoTerminalError extends StashError {}

const TTY_PATH = '/dev/tty';

/**
 * A terminal stream on `fd`. node:tty is loaded here, when a prompt is shown, not with
 * this module: it brings node:net and the stream machinery, about 4 ms of each run of
 * the commands that import prompts but seldom ask (container list, container create).
 */
function ttyStream(fd: number): import('node:tty').ReadStream {
  return new (process.getBuiltinModule('node:tty').ReadStream)(fd);
}
const WINDOWS = process.platform === 'win32';

/** Opens the controlling terminal, or null when there is none (cron, CI, setsid). Unix only. */
function openTty(): number | null {
  if (WINDOWS) return null;
  try {
    return openSync(TTY_PATH, 'r+');
  } catch {
    return null;
  }
}

/** True when a prompt could be shown. */
export function haveTerminal(): boolean {
  if (WINDOWS) return haveConsole();
  const fd = openTty();
  if (fd === null) return false;
  closeSync(fd);
  return true;
}

/** Drops the last UTF-8 character of buf[0..len) (a lead byte and its continuation bytes). */
function backspace(buf: Buffer, len: number): number {
  let n = len;
  while (n > 0) {
    n--;
    const b = buf[n]!;
    buf[n] = 0;
    if ((b & 0xc0) !== 0x80) break;
  }
  return n;
}

/**
 * Discards what was typed on the terminal before a hidden prompt appeared, as
 * sudo and ssh do (readpassphrase's TCSAFLUSH): it was typed with echo on, so
 * it was shown on the screen, and a line meant for an earlier question would
 * otherwise answer this one. Reads through a second, non-blocking descriptor
 * (O_NONBLOCK belongs to that open file only) until nothing is left; every
 * byte read is zeroed. Returns how many bytes were dropped.
 */
function discardTypeAhead(): number {
  let fd: number;
  try {
    fd = openSync(TTY_PATH, constants.O_RDONLY | constants.O_NONBLOCK | constants.O_NOCTTY);
  } catch {
    return 0;
  }
  const scratch = secureAlloc(256);
  let dropped = 0;
  try {
    for (let i = 0; i < 4096; i++) {
      const n = readSync(fd, scratch, 0, scratch.length, null);
      if (n <= 0) break;
      dropped += n;
      scratch.fill(0, 0, n);
    }
  } catch {
    // EAGAIN: nothing (more) is waiting.
  } finally {
    wipe(scratch);
    closeSync(fd);
  }
  return dropped;
}

/**
 * Asks `question` on the terminal and reads a line with echo off, into a
 * secure buffer of exact length (release it with wipe()). Ctrl-C or Ctrl-D on
 * an empty line cancel (INTERRUPTED). Lines longer than maxBytes are refused.
 */
export function promptHidden(question: string, maxBytes = 1024): Promise<Buffer> {
  if (WINDOWS) return promptHiddenConsole(question, maxBytes);
  const fd = openTty();
  if (fd === null) throw new NoTerminalError('NO_TERMINAL', 'no terminal to ask on');
  const input = ttyStream(fd);
  const buf = secureAlloc(maxBytes);
  let len = 0;
  // Echo goes off before the question appears: an answer typed (or sent by a
  // script) the moment the question shows must never be echoed.
  input.setRawMode(true);
  if (discardTypeAhead() > 0)
    writeSync(fd, '(what was typed before this prompt was shown on the screen and has been discarded)\n');
  writeSync(fd, question);

  return new Promise<Buffer>((resolve, reject) => {
    let settled = false;
    const restore = (): void => {
      input.setRawMode(false);
      input.removeAllListeners('data');
      for (const s of signals) process.removeListener(s, onSignal);
      writeSync(fd, '\n');
      input.destroy(); // closes fd
    };
    const finish = (err: Error | null): void => {
      if (settled) return;
      settled = true;
      restore();
      if (err) {
        wipe(buf);
        reject(err);
        return;
      }
      const out = secureAlloc(len);
      buf.copy(out, 0, 0, len);
      wipe(buf);
      resolve(out);
    };
    // A signal while the terminal is raw must not leave it without echo.
    const signals = ['SIGTERM', 'SIGHUP'] as const;
    const onSignal = (sig: NodeJS.Signals): void => {
      finish(new StashError('INTERRUPTED', `interrupted by ${sig}`));
    };
    for (const s of signals) process.once(s, onSignal);
    input.on('data', (chunk: Buffer) => {
      try {
        for (const byte of chunk) {
          if (settled) break;
          if (byte === 0x0d || byte === 0x0a) finish(null);
          else if (byte === 0x03) finish(new StashError('INTERRUPTED', 'cancelled'));
          else if (byte === 0x04) {
            if (len === 0) finish(new StashError('INTERRUPTED', 'cancelled (end of input)'));
            else finish(null);
          } else if (byte === 0x7f || byte === 0x08) len = backspace(buf, len);
          else if (byte === 0x15) {
            buf.fill(0, 0, len); // Ctrl-U: start over
            len = 0;
          } else if (len >= maxBytes)
            finish(new StashError('INPUT_TOO_LARGE', `the input is longer than ${maxBytes} bytes`));
          else buf[len++] = byte;
        }
      } finally {
        chunk.fill(0);
      }
    });
    input.on('error', (err) => finish(new StashError('INPUT_ERROR', `cannot read from the terminal: ${err.message}`)));
  });
}

/** Asks `question` on the terminal and reads one line (echo on); null when there is no terminal. */
export function askLine(question: string): Promise<string | null> {
  if (WINDOWS) return askLineConsole(question);
  const fd = openTty();
  if (fd === null) return Promise.resolve(null);
  const input = ttyStream(fd);
  writeSync(fd, question);
  return new Promise((resolve) => {
    let line = '';
    input.setEncoding('utf8');
    input.on('data', (s: string) => {
      line += s;
      const nl = line.indexOf('\n');
      if (nl >= 0) {
        input.destroy();
        resolve(line.slice(0, nl).trim());
      }
    });
    input.on('end', () => resolve(line.trim()));
    input.on('error', () => resolve(null));
  });
}
