/**
 * `stash run --file NAME=REF`: a secret handed to a program as a file rather
 * than an environment variable (sops exec-file, gopass env --file). Each file
 * is 0600 in a fresh 0700 folder on a tmpfs (memory-folder.ts chooses it:
 * XDG_RUNTIME_DIR, else /dev/shm), so it never reaches a disk; it is overwritten and removed when
 * the command ends (normally, on Ctrl-C, or when the agent ends it before a
 * suspend; a SIGKILL of stash itself leaves it until logout clears the tmpfs).
 */
import { closeSync, openSync, rmSync, writeSync, fstatSync } from 'node:fs';
import { join } from 'node:path';
import { makeMemoryFolder } from './memory-folder.js';

export class SecretFiles {
  private constructor(
    readonly dir: string,
    private readonly files: string[] = [],
  ) {}

  /** A private folder on tmpfs; without one, refused (69) unless `insecureTmp` allows the temp folder. */
  static create(insecureTmp: boolean): SecretFiles {
    return new SecretFiles(makeMemoryFolder('stash-run-', insecureTmp));
  }

  /** Writes `value` to a 0600 file named for `variable`; returns its path. */
  write(variable: string, value: Buffer): string {
    const path = join(this.dir, variable);
    const fd = openSync(path, 'wx', 0o600);
    try {
      let off = 0;
      while (off < value.length) off += writeSync(fd, value, off, value.length - off);
    } finally {
      closeSync(fd);
    }
    this.files.push(path);
    return path;
  }

  /** Overwrites every file with zeros, then removes the folder. Never throws. */
  remove(): void {
    for (const path of this.files) {
      try {
        const fd = openSync(path, 'r+');
        try {
          const size = fstatSync(fd).size;
          const zeros = Buffer.alloc(Math.min(size, 1 << 20));
          for (let off = 0; off < size; ) off += writeSync(fd, zeros, 0, Math.min(zeros.length, size - off), off);
        } finally {
          closeSync(fd);
        }
      } catch {
        /* the program may have removed it */
      }
    }
    rmSync(this.dir, { recursive: true, force: true });
  }
}
