/**
 * `stash run --file NAME=REF`: a secret handed to a program as a file rather
 * than an environment variable (sops exec-file, gopass env --file). Each file
 * is 0600 in a fresh 0700 folder under XDG_RUNTIME_DIR, a tmpfs that is the
 * user's alone and never reaches a disk; it is overwritten and removed when
 * the command ends (normally, on Ctrl-C, or when the agent ends it before a
 * suspend; a SIGKILL of stash itself leaves it until logout clears the tmpfs).
 */
import { closeSync, mkdtempSync, openSync, rmSync, writeSync, fstatSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { StashError } from '../errors.js';

export class SecretFiles {
  private constructor(
    readonly dir: string,
    private readonly files: string[] = [],
  ) {}

  /** A private folder on tmpfs; without XDG_RUNTIME_DIR, refused unless `insecureTmp` allows the temp folder. */
  static create(insecureTmp: boolean): SecretFiles {
    const runtime = process.env.XDG_RUNTIME_DIR;
    if (!runtime || !existsSync(runtime)) {
      if (!insecureTmp) {
        throw new StashError(
          'NO_RUNTIME_DIR',
          'XDG_RUNTIME_DIR is not set, so there is no private tmpfs for a secret file; log in through a session that sets it, or add --insecure-tmp to use the temporary folder (it may be on disk)',
        );
      }
    }
    const parent = runtime && existsSync(runtime) ? runtime : tmpdir();
    return new SecretFiles(mkdtempSync(join(parent, 'stash-run-')));
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
