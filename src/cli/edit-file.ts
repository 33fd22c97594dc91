/**
 * The file `stash edit` hands to the editor: 0600, in a fresh 0700 folder on
 * a tmpfs (memory-folder.ts chooses it: XDG_RUNTIME_DIR, else /dev/shm), so
 * the plaintext never reaches a disk. Afterwards every
 * file in that folder (the editor's swap and backup files too) is overwritten
 * with zeros and removed, and the folder with them.
 */
import { closeSync, fstatSync, fsyncSync, lstatSync, openSync, readdirSync, rmSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { StashError } from '../errors.js';
import { MAX_VALUE_BYTES } from '../vault/names.js';
import { makeMemoryFolder } from './memory-folder.js';
import { readFdSecure } from './secure-read.js';

/** Overwrites a regular file with zeros (on disk too, as far as the file system lets) and removes it. Never throws. */
function shred(path: string): void {
  try {
    const fd = openSync(path, 'r+');
    try {
      const size = fstatSync(fd).size;
      const zeros = Buffer.alloc(Math.min(Math.max(size, 1), 1 << 16));
      for (let off = 0; off < size; ) off += writeSync(fd, zeros, 0, Math.min(zeros.length, size - off), off);
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
  } catch {
    /* gone already, or not a regular file: removed below either way */
  }
  rmSync(path, { recursive: true, force: true });
}

export class EditFile {
  private removed = false;

  private constructor(
    readonly dir: string,
    readonly path: string,
  ) {}

  /**
   * A new private folder for the file of `name` (mode 0700), made before
   * anything is decrypted so that a refusal costs no password.
   */
  static prepare(name: string, insecureTmp: boolean): EditFile {
    const dir = makeMemoryFolder('stash-edit-', insecureTmp);
    return new EditFile(dir, join(dir, name));
  }

  /** Writes `value` to the file, mode 0600 (created here; an existing file is an error). */
  write(value: Buffer): void {
    const fd = openSync(this.path, 'wx', 0o600);
    try {
      for (let off = 0; off < value.length; ) off += writeSync(fd, value, off, value.length - off);
    } finally {
      closeSync(fd);
    }
  }

  /** The file's bytes now, in secure memory (wipe them); INPUT_TOO_LARGE past the value limit, FILE_NOT_FOUND when the editor removed it. */
  read(): Buffer {
    let fd: number;
    try {
      fd = openSync(this.path, 'r');
    } catch {
      throw new StashError('FILE_NOT_FOUND', 'the edited file is gone (did the editor delete it?); nothing was stored');
    }
    try {
      return readFdSecure(fd, { maxBytes: MAX_VALUE_BYTES, what: 'the edited value', stripNewline: false });
    } finally {
      closeSync(fd);
    }
  }

  /** Overwrites and removes every file in the folder, then the folder. Idempotent, never throws. */
  remove(): void {
    if (this.removed) return;
    this.removed = true;
    const walk = (dir: string): void => {
      let names: string[] = [];
      try {
        names = readdirSync(dir);
      } catch {
        return;
      }
      for (const n of names) {
        const p = join(dir, n);
        try {
          const st = lstatSync(p);
          if (st.isDirectory()) walk(p);
          else if (st.isFile()) shred(p);
        } catch {
          /* gone meanwhile */
        }
      }
    };
    walk(this.dir);
    rmSync(this.dir, { recursive: true, force: true });
  }
}
