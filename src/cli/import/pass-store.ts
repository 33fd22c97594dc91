/**
 * Reading a password store folder: every `*.gpg` file under it (folders
 * starting with `.`, such as .git and .extensions, are skipped; symbolic
 * links to folders are not followed, so a loop cannot trap the walk), each
 * decrypted by the user's own `gpg` (the one on PATH, with its agent and
 * pinentry, as `pass show` would), one file at a time.
 *
 * gpg writes the plaintext to a pipe; each chunk is copied into secure
 * memory and zeroed at once. Its stderr (key and pinentry messages, never
 * plaintext) is kept for the error message when it fails.
 */
import { spawn } from 'node:child_process';
import { readdirSync, statSync } from 'node:fs';
import { join, relative, sep } from 'node:path';
import { StashError } from '../../errors.js';
import { secureAlloc, wipe } from '../../vault/secure.js';
import { ImportError } from './collector.js';

/** Largest decrypted entry read (a pass entry is a few lines; stash values are at most 64 KiB). */
const MAX_PLAINTEXT = 1024 * 1024;

/** The entries of the store at `dir`: paths relative to it, without `.gpg`, sorted. */
export function storeEntries(dir: string): string[] {
  let st;
  try {
    st = statSync(dir);
  } catch {
    throw new StashError('FILE_NOT_FOUND', `cannot read the password store ${dir}: no such folder`);
  }
  if (!st.isDirectory())
    throw new ImportError(`${dir} is not a folder; pass imports a password store folder (such as ~/.password-store)`);
  const out: string[] = [];
  const walk = (folder: string): void => {
    for (const e of readdirSync(folder, { withFileTypes: true })) {
      if (e.name.startsWith('.')) continue;
      const path = join(folder, e.name);
      if (e.isDirectory()) walk(path);
      else if (e.name.endsWith('.gpg') && (e.isFile() || (e.isSymbolicLink() && isFile(path)))) {
        out.push(relative(dir, path).slice(0, -'.gpg'.length).split(sep).join('/'));
      }
    }
  };
  walk(dir);
  return out.sort();
}

function isFile(path: string): boolean {
  try {
    return statSync(path).isFile();
  } catch {
    return false;
  }
}

/** Decrypts one file with gpg into secure memory (release with wipe()). */
export function gpgDecrypt(file: string, env: NodeJS.ProcessEnv = process.env): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    let buf = secureAlloc(4096);
    let used = 0;
    let failed: Error | null = null;
    let stderr = '';
    const child = spawn('gpg', ['--quiet', '--yes', '--batch', '--decrypt', '--', file], {
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
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
    child.stdout.on('data', (chunk: Buffer) => {
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
    child.stderr.on('data', (d: Buffer) => {
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
