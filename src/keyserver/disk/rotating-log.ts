/**
 * server.log written by the server itself (`--log-file PATH`), rotated by
 * size: before a line would take the file past `maxBytes` it becomes
 * PATH.1, PATH.1 becomes PATH.2 and so on, and the oldest of `keep` rotated
 * files is replaced. The logs then take at most (keep + 1) x maxBytes, the
 * share of the disk cap disk/budget.ts gives them.
 *
 * Writes are synchronous appends: lines stay in order and a line is on its
 * way to the disk before the event it tells of continues (a log is read
 * after a crash). The server logs a few lines a second at most. A line that
 * cannot be written (a full disk) goes to stderr instead, so it is not lost
 * silently; under systemd that is the journal.
 */
import { closeSync, existsSync, fstatSync, openSync, renameSync, writeSync } from 'node:fs';
import { ConfigError } from '../../errors.js';

export class RotatingLogFile {
  private fd: number;
  private size: number;

  private constructor(
    readonly path: string,
    private readonly maxBytes: number,
    private readonly keep: number,
  ) {
    let fd: number;
    try {
      fd = RotatingLogFile.openFile(path);
    } catch (err) {
      // A server.log this user may not append to, in a folder it may write: the file systemd's
      // StandardError=append: created as root before the server wrote its own log. Rotated aside.
      if (!existsSync(path)) throw err;
      try {
        this.shift();
        fd = RotatingLogFile.openFile(path);
      } catch {
        throw err;
      }
    }
    this.fd = fd;
    this.size = fstatSync(this.fd).size;
  }

  /** Opens (creating) the log at `path`; a file that cannot be opened is a configuration error naming it. */
  static open(path: string, maxBytes: number, keep: number): RotatingLogFile {
    return new RotatingLogFile(path, maxBytes, keep);
  }

  private static openFile(path: string): number {
    try {
      return openSync(path, 'a', 0o640);
    } catch (err) {
      throw new ConfigError(
        `--log-file ${path}: cannot open the file for writing (${(err as NodeJS.ErrnoException).code ?? 'error'})`,
      );
    }
  }

  /** Appends `text` (whole lines), rotating first when it would not fit. */
  write(text: string): boolean {
    const bytes = Buffer.byteLength(text);
    try {
      if (this.size > 0 && this.size + bytes > this.maxBytes) this.rotate();
      if (this.fd < 0) this.fd = RotatingLogFile.openFile(this.path);
      writeSync(this.fd, text);
      this.size += bytes;
    } catch {
      process.stderr.write(text);
    }
    return true;
  }

  private rotate(): void {
    closeSync(this.fd);
    this.fd = -1;
    this.shift();
    // Opened again by the next write should this fail (the line then goes to stderr).
    this.fd = RotatingLogFile.openFile(this.path);
    this.size = 0;
    const line = `${new Date().toISOString()} info log: rotated at ${this.maxBytes} bytes; older lines are in ${this.path}.1 (${this.keep} rotated file(s) kept)\n`;
    writeSync(this.fd, line);
    this.size += Buffer.byteLength(line);
  }

  /** PATH.1 -> PATH.2 ..., PATH -> PATH.1: the oldest kept file is replaced. */
  private shift(): void {
    for (let i = this.keep; i >= 1; i--) {
      try {
        renameSync(i === 1 ? this.path : `${this.path}.${i - 1}`, `${this.path}.${i}`);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
      }
    }
  }

  close(): void {
    try {
      closeSync(this.fd);
    } catch {
      // already closed
    }
  }
}
