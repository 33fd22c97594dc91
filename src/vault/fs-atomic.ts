/**
 * Crash-safe file writes. A vault file is never rewritten in place: the new
 * bytes go to a temp file in the same folder (0600; a linked shared container
 * keeps the mode of the file it replaces), are fsync'ed, renamed over
 * the old name (atomic on POSIX and on NTFS), and then the folder is fsync'ed so
 * the rename itself survives a power cut. A crash leaves either the old file or
 * the new one, plus at most a temp file that readers ignore and the next locked
 * write sweeps away. Temp files only ever hold ciphertext or public data.
 */
import {
  closeSync,
  constants,
  fchmodSync,
  fchownSync,
  fstatSync,
  fsyncSync,
  lstatSync,
  mkdirSync,
  openSync,
  readdirSync,
  readSync,
  renameSync,
  unlinkSync,
  writeSync,
  chmodSync,
  type Stats,
} from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { errnoCode, ioError, VaultError } from './errors.js';
import { randomBytes } from './secure.js';

export const FILE_MODE = 0o600;
/** A new file that other users share (a linked shared container): 0664 less the umask, so 0644 under the usual 022. */
export const SHARED_FILE_MODE = 0o664;
export const DIR_MODE = 0o700;
const isWindows = process.platform === 'win32';

/** Temp files are `.<target>.tmp-<random>`: hidden, and never a valid container name. */
export function isTempName(name: string): boolean {
  return name.startsWith('.') && name.includes('.tmp-');
}

function tempPathFor(path: string): string {
  return join(dirname(path), `.${basename(path)}.tmp-${randomBytes(6).toString('hex')}`);
}

/** fsync a folder so a rename or unlink inside it is durable. */
export function fsyncDir(dir: string): void {
  if (isWindows) return; // Windows cannot open a folder as a file; NTFS journals renames.
  let fd: number;
  try {
    fd = openSync(dir, 'r');
  } catch (err) {
    throw ioError(err, 'open folder', dir);
  }
  try {
    fsyncSync(fd);
  } catch (err) {
    // Some file systems (certain FUSE and network mounts) reject fsync on a folder;
    // the rename has still happened, only its durability is up to them.
    const code = errnoCode(err);
    if (code !== 'EINVAL' && code !== 'ENOTSUP' && code !== 'EBADF') throw ioError(err, 'sync folder', dir);
  } finally {
    closeSync(fd);
  }
}

/** Creates `dir` (and parents) with mode 0700; an existing folder is left as it is. */
export function ensureDir(dir: string): void {
  try {
    mkdirSync(dir, { recursive: true, mode: DIR_MODE });
  } catch (err) {
    throw ioError(err, 'create folder', dir);
  }
}

/** Sets a folder we own to 0700 (POSIX only). */
export function restrictDir(dir: string): void {
  if (isWindows) return;
  try {
    chmodSync(dir, DIR_MODE);
  } catch (err) {
    throw ioError(err, 'set permissions on', dir);
  }
}

export interface AtomicWriteOptions {
  /**
   * Runs once the new bytes are durable, right before the rename; if it
   * throws, nothing is replaced (a compare-and-swap for files that other
   * programs may change, such as a shared container in a git checkout).
   */
  beforeRename?: () => void;
  /**
   * A file that other users read and write (a linked shared container): a new
   * one is SHARED_FILE_MODE less the umask, and a replaced one keeps its mode
   * and, where this user may set it, its group. Otherwise the file is 0600.
   */
  shared?: boolean;
}

/** Gives the temp file `fd` the mode and group of the file at `path`, if there is one. */
function keepModeOf(path: string, fd: number): void {
  let st: Stats;
  try {
    st = lstatSync(path);
  } catch {
    return; // a new file: SHARED_FILE_MODE less the umask
  }
  if (!st.isFile() || isWindows) return;
  try {
    fchownSync(fd, -1, st.gid);
  } catch {
    // Not a group of ours (EPERM): the folder's or our own group it is, as for any new file there.
  }
  fchmodSync(fd, st.mode & 0o777);
}

/**
 * Atomically replaces (or creates) `path` with `chunks`, mode 0600 unless
 * `opts.shared`. On any failure the temp file is removed and the old file is
 * untouched.
 */
export function atomicWrite(path: string, chunks: readonly Uint8Array[], opts: AtomicWriteOptions = {}): void {
  const tmp = tempPathFor(path);
  let fd: number;
  try {
    fd = openSync(tmp, 'wx', opts.shared ? SHARED_FILE_MODE : FILE_MODE);
  } catch (err) {
    throw ioError(err, 'create', tmp);
  }
  try {
    if (opts.shared) keepModeOf(path, fd);
    for (const chunk of chunks) {
      let off = 0;
      while (off < chunk.length) off += writeSync(fd, chunk, off, chunk.length - off);
    }
    fsyncSync(fd);
  } catch (err) {
    closeSync(fd);
    unlinkQuiet(tmp);
    throw ioError(err, 'write', tmp);
  }
  closeSync(fd);
  try {
    opts.beforeRename?.();
  } catch (err) {
    unlinkQuiet(tmp);
    throw err;
  }
  try {
    renameSync(tmp, path);
  } catch (err) {
    unlinkQuiet(tmp);
    throw ioError(err, 'replace', path);
  }
  fsyncDir(dirname(path));
}

/** Removes a file and makes the removal durable; false when it did not exist. */
export function removeFile(path: string): boolean {
  try {
    unlinkSync(path);
  } catch (err) {
    if (errnoCode(err) === 'ENOENT') return false;
    throw ioError(err, 'remove', path);
  }
  fsyncDir(dirname(path));
  return true;
}

function unlinkQuiet(path: string): void {
  try {
    unlinkSync(path);
  } catch {
    // Already gone, or the folder vanished: nothing left to clean.
  }
}

/**
 * Opens `path` read-only and runs `read` on it with the file's stat; null when
 * the file does not exist. Errors other than a VaultError from `read` become
 * I/O errors naming the path; the descriptor is always closed.
 */
function withOpenFile<T>(path: string, read: (fd: number, st: Stats) => T): T | null {
  let fd: number;
  try {
    // Non-blocking, so a FIFO found at the path (a linked shared container sits in
    // a folder others write) is opened at once and refused as not a regular file,
    // instead of blocking until some writer opens it. No effect on regular files.
    fd = openSync(path, constants.O_RDONLY | (constants.O_NONBLOCK ?? 0));
  } catch (err) {
    if (errnoCode(err) === 'ENOENT') return null;
    throw ioError(err, 'open', path);
  }
  try {
    return read(fd, fstatSync(fd));
  } catch (err) {
    if (err instanceof VaultError) throw err;
    throw ioError(err, 'read', path);
  } finally {
    closeSync(fd);
  }
}

/** Fills `buf` from the start of `fd`; returns the bytes read (fewer when the file shrank under us). */
function readFromStart(fd: number, buf: Buffer): Buffer {
  let off = 0;
  while (off < buf.length) {
    const n = readSync(fd, buf, off, buf.length - off, off);
    if (n === 0) break; // shrank under us: the caller's parser sees a short file
    off += n;
  }
  return off === buf.length ? buf : buf.subarray(0, off);
}

/**
 * Reads a whole regular file of at most `maxBytes`. Returns null when it does
 * not exist. `tooBig` builds the error for a larger file or a non-file (size -1;
 * each caller names its own corruption code), so a planted multi-gigabyte file cannot exhaust memory.
 */
export function readBounded(path: string, maxBytes: number, tooBig: (size: number) => VaultError): Buffer | null {
  return withOpenFile(path, (fd, st) => {
    if (!st.isFile()) throw tooBig(-1);
    if (st.size > maxBytes) throw tooBig(st.size);
    return readFromStart(fd, Buffer.alloc(st.size));
  });
}

/**
 * Reads at most `maxBytes` from the start of a file (container headers).
 * Returns null when it does not exist; `bad` builds the error for a non-file.
 */
export function readPrefix(
  path: string,
  maxBytes: number,
  bad: (why: string) => VaultError,
): { bytes: Buffer; size: number; mtime: Date } | null {
  return withOpenFile(path, (fd, st) => {
    if (!st.isFile()) throw bad('it is not a regular file');
    return { bytes: readFromStart(fd, Buffer.alloc(Math.min(maxBytes, st.size))), size: st.size, mtime: st.mtime };
  });
}

/** Deletes leftover temp files of crashed writes in `dir`. Call only while holding the vault lock. */
export function sweepTempFiles(dir: string): number {
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return 0;
  }
  let removed = 0;
  for (const name of names) {
    if (!isTempName(name)) continue;
    const path = join(dir, name);
    try {
      if (lstatSync(path).isFile()) {
        unlinkSync(path);
        removed++;
      }
    } catch {
      // Raced with another cleanup; fine.
    }
  }
  return removed;
}
