/**
 * Reading a password store folder: every `*.gpg` regular file under it
 * (folders starting with `.`, such as .git and .extensions, are skipped),
 * each decrypted by the user's own `gpg` (the one on PATH, with its agent and
 * pinentry, as `pass show` would), one file at a time.
 *
 * A store may come from someone else (a tarball, a clone). A symbolic link in
 * it could point at one of the user's own files (`web/innocent.gpg ->
 * ~/outside/bank.gpg`), whose secret would then land in a container that may
 * be shared with whoever handed the store over. So only the store's own
 * folder is resolved (once, with realpath: it may be reached through a link),
 * and nothing below it is followed: a symbolic link to a file or a folder is
 * skipped and named in the report. Each file is then opened here with
 * O_NOFOLLOW and checked to be the very file the walk saw (same device and
 * inode) under a path that still has no link in it, and gpg reads that open
 * file on its stdin: a swap between the walk and the read is refused, not
 * followed.
 *
 * gpg writes the plaintext to a pipe; each chunk is copied into secure
 * memory and zeroed at once. Its stderr (key and pinentry messages, never
 * plaintext) is kept for the error message when it fails.
 */
import { spawn } from 'node:child_process';
import { closeSync, constants, fstatSync, lstatSync, openSync, readdirSync, realpathSync, statSync } from 'node:fs';
import { join, relative, sep } from 'node:path';
import { StashError } from '../../errors.js';
import { byCodeUnits } from '../../vault/names.js';
import { secureAlloc, wipe } from '../../vault/secure.js';
import { ImportError } from './collector.js';

/** Largest decrypted entry read (a pass entry is a few lines; stash values are at most 64 KiB). */
const MAX_PLAINTEXT = 1024 * 1024;

/** One entry file found by the walk. */
export interface StoreFile {
  /** Its path in the store without `.gpg`, folders joined by `/` (`web/github.com`). */
  rel: string;
  /** Which file it was when the walk saw it, so that a file swapped in later is refused. */
  dev: number;
  ino: number;
}

/** What is under a store folder. */
export interface StoreListing {
  /** The store folder's real path (every file read lies below it). */
  root: string;
  /** The entry files, sorted by `rel`. */
  files: StoreFile[];
  /** What was not read, one line each for the report: `web/innocent.gpg is a symbolic link; ...`. */
  skipped: string[];
}

/** The entries of the store at `dir` (see the top of this file for what is read and what is skipped). */
export function storeEntries(dir: string): StoreListing {
  let root: string;
  try {
    root = realpathSync(dir);
  } catch {
    throw new StashError('FILE_NOT_FOUND', `cannot read the password store ${dir}: no such folder`);
  }
  if (!statSync(root).isDirectory())
    throw new ImportError(`${dir} is not a folder; pass imports a password store folder (such as ~/.password-store)`);
  const files: StoreFile[] = [];
  const skipped: string[] = [];
  const walk = (folder: string): void => {
    for (const e of readdirSync(folder, { withFileTypes: true })) {
      if (e.name.startsWith('.')) continue;
      const path = join(folder, e.name);
      const rel = relative(root, path).split(sep).join('/');
      if (e.isSymbolicLink()) {
        // A link to anything else (a README) would not have been read anyway.
        if (isFolder(path)) skipped.push(`${rel} is a symbolic link to a folder; skipped with everything under it`);
        else if (e.name.endsWith('.gpg')) skipped.push(`${rel} is a symbolic link; skipped`);
      } else if (e.isDirectory()) {
        walk(path);
      } else if (e.name.endsWith('.gpg')) {
        const st = e.isFile() ? lstatSync(path) : null;
        if (st?.isFile()) files.push({ rel: rel.slice(0, -'.gpg'.length), dev: st.dev, ino: st.ino });
        else skipped.push(`${rel} is not a regular file; skipped`);
      }
    }
  };
  walk(root);
  return { root, files: files.sort((a, b) => byCodeUnits(a.rel, b.rel)), skipped };
}

function isFolder(path: string): boolean {
  try {
    return statSync(path).isDirectory();
  } catch {
    return false;
  }
}

/**
 * Opens one entry file for reading, refusing anything but the regular file
 * the walk saw at a path with no symbolic link below the store's root. The
 * caller closes the descriptor. `shown` names the file in messages.
 */
export function openStoreFile(root: string, file: StoreFile, shown: string): number {
  const path = join(root, `${file.rel}.gpg`);
  const changed = (): ImportError =>
    new ImportError(
      `${shown} changed while the store was read (replaced by a symbolic link or another file, or removed); nothing was imported: import the store again`,
    );
  let fd: number;
  try {
    // O_NONBLOCK: a FIFO swapped in must not hang the open; it changes nothing for a regular file.
    fd = openSync(path, constants.O_RDONLY | (constants.O_NOFOLLOW ?? 0) | (constants.O_NONBLOCK ?? 0));
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ELOOP' || code === 'ENOENT' || code === 'ENOTDIR') throw changed();
    throw new ImportError(`cannot read ${shown}: ${(err as Error).message}`);
  }
  try {
    const st = fstatSync(fd);
    if (!st.isFile() || st.dev !== file.dev || st.ino !== file.ino || realpathSync(path) !== path) throw changed();
    return fd;
  } catch (err) {
    closeSync(fd);
    throw err;
  }
}

/**
 * Decrypts the file open at `fd` (from openStoreFile; gpg reads it on its
 * stdin, so gpg never opens a path itself) into secure memory (release with
 * wipe()). `file` names it in messages. The caller closes `fd`.
 */
export function gpgDecrypt(fd: number, file: string, env: NodeJS.ProcessEnv = process.env): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    let buf = secureAlloc(4096);
    let used = 0;
    let failed: Error | null = null;
    let stderr = '';
    const child = spawn('gpg', ['--quiet', '--yes', '--batch', '--decrypt'], {
      env,
      stdio: [fd, 'pipe', 'pipe'],
    });
    child.on('error', (err) => {
      failed =
        (err as NodeJS.ErrnoException).code === 'ENOENT'
          ? new StashError(
              'GPG_UNAVAILABLE',
              'gpg is not on PATH: install GnuPG (Debian/Ubuntu: apt install gnupg) to import a password store',
            )
          : new StashError('GPG_UNAVAILABLE', `cannot run gpg: ${(err as Error).message}`);
    });
    child.stdout!.on('data', (chunk: Buffer) => {
      try {
        if (failed) return;
        if (used + chunk.length > MAX_PLAINTEXT) {
          failed = new ImportError(`${file}: the decrypted entry is larger than ${MAX_PLAINTEXT} bytes`);
          child.kill();
          return;
        }
        if (used + chunk.length > buf.length) {
          const bigger = secureAlloc(Math.min(MAX_PLAINTEXT, Math.max(buf.length * 2, used + chunk.length)));
          buf.copy(bigger, 0, 0, used);
          wipe(buf);
          buf = bigger;
        }
        chunk.copy(buf, used);
        used += chunk.length;
      } finally {
        chunk.fill(0);
      }
    });
    child.stderr!.on('data', (d: Buffer) => {
      if (stderr.length < 4096) stderr += d.toString('utf8');
    });
    child.on('close', (code, signal) => {
      if (!failed && code !== 0) {
        const why =
          stderr.trim().split('\n').filter(Boolean).pop() ?? (signal ? `killed by ${signal}` : `exit status ${code}`);
        failed = new StashError('GPG_FAILED', `gpg could not decrypt ${file}: ${why} (nothing was imported)`);
      }
      if (failed) {
        wipe(buf);
        reject(failed);
        return;
      }
      // A view marked secure, as secureAlloc's own views are: wipe() then frees the whole allocation.
      const out = buf.subarray(0, used) as Buffer & { secure?: boolean };
      out.secure = true;
      resolve(out);
    });
  });
}
