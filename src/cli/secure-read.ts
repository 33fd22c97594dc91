/**
 * Reading secrets (passwords, values for `stash set`) from a file descriptor
 * straight into sodium secure memory: the bytes never pass through a JS string
 * or an ordinary Buffer. Buffers that grow are copied and the old one wiped.
 */
import { closeSync, fstatSync, openSync, readSync } from 'node:fs';
import { StashError } from '../errors.js';
import { secureAlloc, wipe } from '../vault/secure.js';
import { octal, warn } from './output.js';
import { sleepSync } from '../process-state.js';

export class InputError extends StashError {}

/** Length of `buf[0..len)` without one trailing "\n" or "\r\n". */
function withoutNewline(buf: Buffer, len: number): number {
  if (len > 0 && buf[len - 1] === 0x0a) len--;
  if (len > 0 && buf[len - 1] === 0x0d) len--;
  return len;
}

/** An exact-size secure copy of buf[0..len); wipes `buf`. */
function finish(buf: Buffer, len: number): Buffer {
  const out = secureAlloc(len);
  buf.copy(out, 0, 0, len);
  wipe(buf);
  return out;
}

/**
 * Reads `fd` to its end into secure memory. More than `maxBytes` is an
 * INPUT_TOO_LARGE error (nothing is kept). With `stripNewline`, one trailing
 * newline is dropped (what `echo` and editors add) before the size is
 * checked, so a value of exactly `maxBytes` followed by its newline fits.
 */
export function readFdSecure(fd: number, opts: { maxBytes: number; what: string; stripNewline: boolean }): Buffer {
  // Room for the "\r\n" that may be stripped; what is left must still fit maxBytes.
  const maxRead = opts.maxBytes + (opts.stripNewline ? 2 : 0);
  let buf = secureAlloc(Math.min(256, maxRead + 1));
  let len = 0;
  try {
    for (;;) {
      if (len === buf.length) {
        if (buf.length > maxRead)
          throw new InputError('INPUT_TOO_LARGE', `${opts.what} is larger than ${opts.maxBytes} bytes`);
        const bigger = secureAlloc(Math.min(buf.length * 2, maxRead + 1));
        buf.copy(bigger, 0, 0, len);
        wipe(buf);
        buf = bigger;
      }
      let n: number;
      try {
        n = readSync(fd, buf, len, buf.length - len, null);
      } catch (err) {
        // A non-blocking pipe (stdin handed over by some shells) has no data yet.
        if ((err as NodeJS.ErrnoException).code === 'EAGAIN') {
          sleepSync(5);
          continue;
        }
        if ((err as NodeJS.ErrnoException).code === 'EOF') break;
        throw new InputError('INPUT_ERROR', `cannot read ${opts.what}: ${(err as Error).message}`);
      }
      if (n === 0) break;
      len += n;
    }
    if (opts.stripNewline) len = withoutNewline(buf, len);
    if (len > opts.maxBytes)
      throw new InputError('INPUT_TOO_LARGE', `${opts.what} is larger than ${opts.maxBytes} bytes`);
  } catch (err) {
    wipe(buf);
    throw err;
  }
  return finish(buf, len);
}

/**
 * Reads a whole file (or a pipe such as `<(pass show x)`) into secure memory,
 * warning when a regular file is readable by other users.
 */
export function readFileSecure(path: string, opts: { maxBytes: number; what: string; stripNewline: boolean }): Buffer {
  let fd: number;
  try {
    fd = openSync(path, 'r');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') throw new InputError('FILE_NOT_FOUND', `cannot read ${opts.what} ${path}: no such file`);
    if (code === 'EACCES' || code === 'EPERM')
      throw new InputError('PERMISSION', `cannot read ${opts.what} ${path}: permission denied`);
    throw new InputError('INPUT_ERROR', `cannot read ${opts.what} ${path}: ${(err as Error).message}`);
  }
  try {
    const st = fstatSync(fd);
    if (st.isDirectory()) throw new InputError('INPUT_ERROR', `${opts.what} ${path} is a directory`);
    if (st.isFile() && (st.mode & 0o077) !== 0 && process.platform !== 'win32') {
      warn(`${opts.what} ${path} is readable by other users (mode ${octal(st.mode)}); chmod 600 it`);
    }
    return readFdSecure(fd, opts);
  } finally {
    closeSync(fd);
  }
}
