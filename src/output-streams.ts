/**
 * What both executables do when stdout or stderr stops taking output: the
 * one place that listens for their 'error' events, so no command needs a
 * patch of its own.
 *
 * - A closed reader (`stash doctor | head -1`: EPIPE) ends the command at
 *   once, quietly, with status 0, as coreutils and git do.
 * - Any other write failure (`stash get c K >/dev/full`: ENOSPC, EIO, EFBIG,
 *   EDQUOT) prints one `PROGRAM: cannot write to standard output: ...` line on
 *   stderr and exits 74 (EX_IOERR).
 * - stderr carries only diagnostics: when it fails there is nowhere left to
 *   report to, so it is muted and the command ends with its own status.
 * - A server (`stash_key_server run`) keeps serving when a stream goes away
 *   (`run --developer | tee`, then Ctrl-C on tee): it switches to
 *   `keepRunningWhenOutputFails`, so its shutdown still removes its state.
 *
 * The guard does not create the streams: process.stdout and process.stderr
 * are made by Node on first use (a pipe's loads node:net and the stream
 * machinery, a few milliseconds of every command), so the handlers are added
 * when a stream is first asked for, and writeStdout() and writeText() write
 * straight to descriptor 1 or 2 while nothing has asked for it.
 *
 * Kept free of heavy imports: it loads before every command, `--help` too.
 */
import { writeSync } from 'node:fs';

export const EXIT_IO_ERROR = 74;

type Which = 'stdout' | 'stderr';

/** Error codes that mean "the reader has gone", not "the output failed". */
const CLOSED = new Set(['EPIPE', 'ECONNRESET', 'ERR_STREAM_DESTROYED', 'ERR_STREAM_WRITE_AFTER_END']);

const REASONS: Record<string, string> = {
  ENOSPC: 'no space left on device',
  EDQUOT: 'disk quota exceeded',
  EFBIG: 'file too large',
  EIO: 'input/output error',
  EAGAIN: 'the output would block',
  EBADF: 'the file descriptor is not open for writing',
  EINVAL: 'the output refuses writes',
};

let program = 'stash';
let keepRunning: ((which: Which, reason: string) => void) | undefined;
/** Per stream: set at its first failed write (a second failure is then ignored). */
const failed: Record<Which, boolean> = { stdout: false, stderr: false };
let installed = false;
/** Per stream: true once the guard wraps its getter and until that getter has made the stream. */
const unmade: Record<Which, boolean> = { stdout: false, stderr: false };

/** "no space left on device (ENOSPC)", or the error's own message. */
export function describeWriteError(err: NodeJS.ErrnoException): string {
  const code = err.code;
  if (code !== undefined && REASONS[code] !== undefined) return `${REASONS[code]} (${code})`;
  if (code !== undefined && CLOSED.has(code)) return `the reader closed it (${code})`;
  return err.message;
}

/**
 * Handles a failed write on `which`: exits (0 for a closed reader, 74 with one
 * line otherwise) or, under `keepRunningWhenOutputFails`, mutes the stream.
 * Idempotent: a second failure of the same stream is ignored, so the 'error'
 * event and a rejected write callback never print two lines.
 */
export function outputStreamFailed(which: Which, err: NodeJS.ErrnoException): void {
  if (which === 'stderr') {
    // Nothing can be reported about stderr itself; the exit status still tells.
    failed.stderr = true;
    return;
  }
  if (failed.stdout) return;
  failed.stdout = true;
  const closed = err.code !== undefined && CLOSED.has(err.code);
  if (keepRunning) {
    keepRunning(
      which,
      closed ? 'standard output was closed' : `cannot write to standard output: ${describeWriteError(err)}`,
    );
    return;
  }
  if (closed) process.exit(0);
  if (!failed.stderr) writeText('stderr', `${program}: cannot write to standard output: ${describeWriteError(err)}\n`);
  process.exit(EXIT_IO_ERROR);
}

/**
 * Installs the handlers on process.stdout and process.stderr; called first by
 * each executable's main(). `name` prefixes the one error line.
 */
export function guardOutputStreams(name: string): void {
  program = name;
  if (installed) return;
  installed = true;
  unmade.stdout = guardWhenMade('stdout');
  unmade.stderr = guardWhenMade('stderr');
}

/**
 * Adds the 'error' handler to process[which] when Node makes the stream (the
 * first read of the property), by wrapping the property's getter. Where the
 * property is not a configurable getter (never seen), the stream is made and
 * guarded now. Returns true when the stream is still unmade.
 */
function guardWhenMade(which: Which): boolean {
  const onError = (err: NodeJS.ErrnoException): void => outputStreamFailed(which, err);
  const desc = Object.getOwnPropertyDescriptor(process, which);
  const make = desc?.get;
  if (desc === undefined || make === undefined || desc.configurable !== true) {
    process[which].on('error', onError);
    return false;
  }
  let stream: NodeJS.WriteStream | undefined;
  Object.defineProperty(process, which, {
    configurable: true,
    enumerable: desc.enumerable ?? false,
    get(): NodeJS.WriteStream {
      if (stream === undefined) {
        stream = make.call(process) as NodeJS.WriteStream;
        stream.on('error', onError);
        unmade[which] = false;
      }
      return stream;
    },
  });
  return true;
}

/**
 * For a long-running server: a failed stdout or stderr no longer ends the
 * process; `report` hears of a stdout failure once (it may log it to stderr,
 * which is muted in turn if it has failed too).
 */
export function keepRunningWhenOutputFails(report: (reason: string) => void): void {
  keepRunning = (_which, reason) => report(reason);
}

/**
 * Writes what it can of `data` straight to descriptor 1 or 2 while Node has
 * not made that stream (nothing is queued ahead of these bytes then), as the
 * stream does on Linux (files, pipes and terminals written synchronously; a
 * blocking write ends before the process can exit). Returns what is left for
 * the stream: all of it on Windows (a console needs the stream's UTF-16
 * conversion) or once the stream exists, the rest after EAGAIN (a descriptor
 * the parent left non-blocking), and nothing once written or failed (the
 * failure went to outputStreamFailed, which ends a CLI command).
 */
function writeDirect(which: Which, data: string | Uint8Array): { rest: Uint8Array } | { failed: Error } | undefined {
  let rest = typeof data === 'string' ? Buffer.from(data) : data;
  if (!unmade[which] || process.platform === 'win32') return { rest };
  if (failed[which]) return undefined;
  try {
    while (rest.length > 0) rest = rest.subarray(writeSync(which === 'stdout' ? 1 : 2, rest));
    return undefined;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EAGAIN') return { rest };
    outputStreamFailed(which, err as NodeJS.ErrnoException);
    return { failed: err as Error };
  }
}

/**
 * Writes `text` to stdout or stderr now, without making Node's stream while
 * none exists (writeDirect); a failure is handled as a failed stream's.
 */
export function writeText(which: Which, text: string): void {
  const left = writeDirect(which, text);
  if (left !== undefined && 'rest' in left) process[which].write(left.rest);
}

/**
 * Writes `data` to stdout and resolves once it is handed to the OS (so the
 * caller may wipe a secret buffer). A failure goes to outputStreamFailed
 * first (which ends a CLI command), then rejects.
 */
export function writeStdout(data: string | Uint8Array): Promise<void> {
  const left = writeDirect('stdout', data);
  if (left === undefined) return Promise.resolve();
  if ('failed' in left) return Promise.reject(left.failed);
  return new Promise((resolve, reject) => {
    process.stdout.write(left.rest, (err) => {
      if (!err) return resolve();
      outputStreamFailed('stdout', err as NodeJS.ErrnoException);
      reject(err);
    });
  });
}
