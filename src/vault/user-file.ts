/**
 * Files the user names for stash to write: `inject -o`, `container export`,
 * `vault backup`, `identity statement --out`, and a linked shared file that
 * `vault restore` puts back. Stash writes only a regular file or a new one.
 *
 * Without this check the atomic rename of fs-atomic.ts replaced whatever the
 * name held: `inject -o /dev/null` run as root swapped the machine's null
 * device for a 0600 file of secrets, and a FIFO, a socket or a symbolic link
 * became such a file just the same. A device, FIFO, socket or folder is
 * refused by what it is, before anything is read or decrypted; a symbolic
 * link is refused too (the user names the file it points to): following it
 * would write wherever someone with write access to the link's folder points
 * it, and its target could be any of the others.
 *
 * The name is looked at with lstat before the write and again right before
 * the rename, which must find a regular file or nothing. The rename itself
 * replaces the name, never writes through it, so a link swapped in after
 * that last look is replaced as a name, not followed.
 */
import { closeSync, fsyncSync, lstatSync, openSync, readlinkSync, type Stats, unlinkSync, writeSync } from 'node:fs';
import { dirname } from 'node:path';
import { errnoCode, ioError, VaultError } from './errors.js';
import { type AtomicWriteOptions, atomicWrite, FILE_MODE, fsyncDir } from './fs-atomic.js';

export interface UserFileOptions extends AtomicWriteOptions {
  /**
   * false: the file must be new (a regular file there is FILE_EXISTS, anything
   * else OUTPUT_NOT_FILE; it is created with O_EXCL, which follows no link).
   * Default true: a regular file there is replaced atomically.
   */
  replace?: boolean;
  /** Mode of a new file when `replace` is false (default 0600). */
  mode?: number;
}

/** What a non-regular file is, in words: "a character device", "a symbolic link (to /x)". */
function kindOf(path: string, st: Stats): string {
  if (st.isSymbolicLink()) {
    let target = '';
    try {
      target = ` (to ${readlinkSync(path)})`;
    } catch {
      // Gone meanwhile: the kind alone still says why.
    }
    return `a symbolic link${target}`;
  }
  if (st.isCharacterDevice()) return 'a character device';
  if (st.isBlockDevice()) return 'a block device';
  if (st.isFIFO()) return 'a FIFO (named pipe)';
  if (st.isSocket()) return 'a socket';
  if (st.isDirectory()) return 'a folder';
  return st.isFile() ? 'a regular file' : 'not a regular file';
}

function notAFile(path: string, st: Stats): VaultError {
  const fix = st.isSymbolicLink() ? 'name the file it points to instead' : 'name a regular file or a new one';
  return new VaultError(
    'OUTPUT_NOT_FILE',
    `${path} is ${kindOf(path, st)}: stash writes only a regular file or a new one, so nothing was written; ${fix}`,
  );
}

function lstatOrNull(path: string): Stats | null {
  try {
    return lstatSync(path);
  } catch (err) {
    if (errnoCode(err) === 'ENOENT') return null;
    throw ioError(err, 'look at', path);
  }
}

/**
 * Checks a path the user named for output: null when nothing is there, the
 * regular file's stat otherwise. OUTPUT_NOT_FILE names what else is there;
 * FILE_EXISTS when `replace` is false and the name is taken. Call it before
 * anything is decrypted, so that a refusal costs no password.
 */
export function checkOutputPath(path: string, opts: { replace?: boolean } = {}): Stats | null {
  const st = lstatOrNull(path);
  if (st === null) return null;
  if (!st.isFile()) throw notAFile(path, st);
  if (opts.replace === false) throw new VaultError('FILE_EXISTS', `${path} exists already; choose another file`);
  return st;
}

/** Writes a file that must not exist yet: O_CREAT | O_EXCL, which refuses any name there, a dangling link too. */
function writeNewFile(path: string, chunks: readonly Uint8Array[], mode: number): void {
  let fd: number;
  try {
    fd = openSync(path, 'wx', mode);
  } catch (err) {
    if (errnoCode(err) === 'EEXIST') {
      checkOutputPath(path, { replace: false });
      throw new VaultError('FILE_EXISTS', `${path} exists already; choose another file`);
    }
    if (errnoCode(err) === 'ENOENT')
      throw new VaultError(
        'FILE_NOT_FOUND',
        `the folder of ${path} does not exist (create it first); nothing was written`,
      );
    throw ioError(err, 'create', path);
  }
  try {
    for (const chunk of chunks) {
      for (let off = 0; off < chunk.length; ) off += writeSync(fd, chunk, off, chunk.length - off);
    }
    fsyncSync(fd);
  } catch (err) {
    closeSync(fd);
    try {
      unlinkSync(path);
    } catch {
      // Already gone: nothing to clean.
    }
    throw ioError(err, 'write', path);
  }
  closeSync(fd);
  fsyncDir(dirname(path));
}

/**
 * Writes `chunks` to a path the user named: a new file, or (unless
 * `opts.replace` is false) an atomic replacement of the regular file there.
 * Anything else at the name is refused and left as it was (checkOutputPath).
 */
export function writeUserFile(path: string, chunks: readonly Uint8Array[], opts: UserFileOptions = {}): void {
  const { replace = true, mode = FILE_MODE, ...atomic } = opts;
  checkOutputPath(path, { replace });
  if (!replace) {
    writeNewFile(path, chunks, mode);
    return;
  }
  atomicWrite(path, chunks, {
    ...atomic,
    beforeRename() {
      // Again, right before the rename: a link, device or FIFO put there meanwhile is not replaced.
      checkOutputPath(path);
      atomic.beforeRename?.();
    },
  });
}
