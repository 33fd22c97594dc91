/**
 * What every clipboard tool offers (xclip.ts, xsel.ts, wayland.ts, macos.ts,
 * windows.ts; one is picked in index.ts), and the one way they are run: the
 * value goes to the tool's standard input, never its argv or environment
 * (other local users read those through ps and /proc), and what a tool
 * prints is copied chunk by chunk into sodium secure memory, each chunk
 * zeroed once copied.
 */
import { spawn } from 'node:child_process';
import { StashError } from '../../errors.js';
import { constantTimeEqual, secureAlloc, wipe } from '../../vault/secure.js';

export type ToolName = 'xclip' | 'xsel' | 'wl-clipboard' | 'pbcopy' | 'powershell';

/** No usable clipboard: no graphical session, a missing tool, a tool that failed. Exit status 69. */
export class ClipboardError extends StashError {
  constructor(message: string) {
    super('CLIPBOARD_UNAVAILABLE', message);
  }
}

export interface ClipboardTool {
  readonly name: ToolName;
  /** The programs it runs, checked on PATH before anything is decrypted. */
  readonly programs: readonly string[];
  /** How to install them, for the error that names a missing one. */
  readonly install: string;
  /**
   * Puts `value` on the clipboard; true when the copy was marked as sensitive
   * for clipboard managers. `stop` ends a wait for the value to be served
   * early (NotServedError): the helper's signal handlers must clear at once.
   */
  copy(value: Buffer, stop?: () => boolean): Promise<boolean>;
  /**
   * The clipboard's text in secure memory (wipe it); 'longer' when it holds more
   * than `limit` bytes (so it is not a value of `limit` bytes); null when it is
   * empty or cannot be read (the reader failed or timed out).
   */
  read(limit: number): Promise<Buffer | 'longer' | null>;
  /** Empties the clipboard. */
  clear(): Promise<void>;
}

export interface RunOptions {
  /** Written to the tool's stdin, which is then closed (no stdin at all when absent). */
  input?: Buffer;
  /** Capture stdout into secure memory, at most this many bytes (more sets `overflow`). */
  capture?: number;
  env?: NodeJS.ProcessEnv;
  /** The tool is killed after this long. Default 5 s: an X server or compositor that hangs must not hang stash. */
  timeoutMs?: number;
}

export interface RunResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  /** stdout in secure memory when captured and within the limit. */
  output: Buffer | null;
  overflow: boolean;
  /** The start of what the tool said on stderr, for error messages (tools print no clipboard content there). */
  stderr: string;
}

/**
 * Runs `program args` and resolves when it exits. Tools that fork to keep
 * serving the clipboard (xclip, xsel, wl-copy) leave a child holding our
 * stderr pipe: the result is taken at the parent's exit, not at the close
 * of its streams, and our end of the pipe is closed then.
 */
export function runTool(program: string, args: string[], opts: RunOptions = {}): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(program, args, {
      stdio: [opts.input ? 'pipe' : 'ignore', opts.capture !== undefined ? 'pipe' : 'ignore', 'pipe'],
      env: opts.env ?? process.env,
      windowsHide: true,
    });
    let stderr = '';
    let out: Buffer | null = opts.capture !== undefined ? secureAlloc(opts.capture) : null;
    let length = 0;
    let overflow = false;
    child.stderr!.on('data', (d: Buffer) => {
      if (stderr.length < 500) stderr += d.toString('utf8');
    });
    child.stdout?.on('data', (d: Buffer) => {
      if (out !== null && length + d.length <= out.length) {
        d.copy(out, length);
        length += d.length;
      } else {
        overflow = true;
      }
      d.fill(0);
    });
    child.stdin?.on('error', () => {
      /* a tool that exits without reading; its status says why */
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs ?? 5000);
    const done = (code: number | null, signal: NodeJS.Signals | null): void => {
      clearTimeout(timer);
      child.stderr!.destroy();
      let output: Buffer | null = null;
      if (out !== null && !overflow) {
        output = secureAlloc(length);
        out.copy(output, 0, 0, length);
      }
      wipe(out);
      out = null;
      resolve({ code, signal, output, overflow, stderr: stderr.trim().split('\n')[0]!.slice(0, 200) });
    };
    child.once('error', (err: NodeJS.ErrnoException) => {
      clearTimeout(timer);
      wipe(out);
      out = null;
      reject(
        err.code === 'ENOENT'
          ? new ClipboardError(`${program} is not installed`)
          : new ClipboardError(`cannot run ${program}: ${err.message}`),
      );
    });
    if (opts.capture !== undefined) {
      // A reader's stdout is its own: wait for all of it (the close), not just the exit.
      child.once('close', done);
    } else {
      child.once('exit', done);
    }
    if (opts.input) child.stdin!.end(opts.input);
  });
}

/**
 * The tool ran, but a paste did not get the value in time. Its forked child
 * may still put it there later, so whoever sees this must still clear the
 * clipboard when the time is up (the helper does).
 */
export class NotServedError extends ClipboardError {}

/** How long the child a tool forks may take to serve the value (a loaded machine took over 100 ms). */
const SERVE_TIMEOUT_MS = 5000;

/**
 * For the X11 tools, which fork a child to serve the clipboard (xclip,
 * xsel): waits until a paste gets `value` (compared in constant time).
 * (wl-copy forks only once the compositor has set its selection.)
 * xsel forks first and takes the selection after its parent has exited, so
 * its exit proves nothing; the command says "Copied" only once the value is
 * there, and the helper's check before it clears (does the clipboard still
 * hold our value?) never sees what was there before.
 */
export async function untilServed(tool: ClipboardTool, value: Buffer, stop?: () => boolean): Promise<void> {
  if (value.length === 0) return;
  const deadline = Date.now() + SERVE_TIMEOUT_MS;
  for (;;) {
    if (stop?.()) throw new NotServedError(`${tool.name}: stopped before the value was on the clipboard`);
    const now = await tool.read(value.length);
    const holds = Buffer.isBuffer(now) && constantTimeEqual(now, value);
    if (Buffer.isBuffer(now)) wipe(now);
    if (holds) return;
    if (Date.now() >= deadline) {
      throw new NotServedError(
        `${tool.name} did not put the value on the clipboard within ${SERVE_TIMEOUT_MS / 1000} s`,
      );
    }
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** Throws ClipboardError naming the tool and what it said, unless it exited with 0. */
export function check(result: RunResult, what: string): void {
  if (result.code === 0) return;
  const how = result.signal ? `was killed by ${result.signal}` : `exited with status ${result.code}`;
  throw new ClipboardError(`${what} ${how}${result.stderr ? `: ${result.stderr}` : ''}`);
}

/** The clipboard text of a reader's run, 'longer' past its limit, or null when the reader failed (an empty clipboard, no owner, killed at its timeout). */
export function readResult(result: RunResult): Buffer | 'longer' | null {
  if (result.code === 0 && result.output !== null) return result.output;
  wipe(result.output);
  return result.code === 0 && result.overflow ? 'longer' : null;
}
