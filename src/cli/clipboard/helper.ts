/**
 * `stash __clip-clear --tool NAME --seconds N`: the small detached process
 * that `get --clip` and `otp --clip` start (copy.ts). It reads the value from
 * its stdin pipe into a secure buffer, ends the helper of an earlier --clip,
 * registers a `form` activity for itself with the agent, copies the value,
 * reports one JSON line on stdout, and waits. When the time is up, or on
 * SIGTERM (the agent's suspend handling, a later --clip), SIGINT or SIGHUP,
 * it clears the clipboard if it still holds the value, and exits.
 *
 * Never in argv or the environment: the value. The helper is hardened like
 * every command (no core file, not dumpable), so the value in its memory is
 * no easier to read than in the command that started it.
 */
import {
  closeSync,
  constants,
  existsSync,
  fstatSync,
  openSync,
  readFileSync,
  renameSync,
  unlinkSync,
  writeFileSync,
  writeSync,
} from 'node:fs';
import { performance } from 'node:perf_hooks';
import { isAbsolute, join } from 'node:path';
import { MAX_CLIP_SECONDS } from '../../config/app-config.js';
import { errorCode, errorMessage } from '../../errors.js';
import { constantTimeEqual, wipe } from '../../vault/secure.js';
import { MAX_VALUE_BYTES } from '../../vault/names.js';
import { clipboardTool, isToolName, type ClipboardTool, type ToolName } from './index.js';
import { NotServedError } from './tool.js';
import type * as ProcInfo from '../../agent/proc-info/index.js';

/** The helper's one report to the command that started it. */
export type HelperReport =
  | { ok: true; marked: boolean; registered: boolean; agentProblem?: string }
  | { ok: false; code: string; message: string };

const PIDFILE = 'clip-clear.pid';

function report(r: HelperReport): void {
  try {
    writeFileSync(1, `${JSON.stringify(r)}\n`);
  } catch {
    /* the command that started us is gone; carry on regardless */
  }
}

function parseArgs(argv: string[]): { tool: string; seconds: number } | null {
  if (argv.length !== 4 || argv[0] !== '--tool' || argv[2] !== '--seconds') return null;
  const seconds = Number(argv[3]);
  if (!/^[0-9]+$/.test(argv[3]!) || seconds < 1 || seconds > MAX_CLIP_SECONDS) return null;
  return { tool: argv[1]!, seconds };
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** The pidfile of the running helper, in the agent's private folder (null on Windows: no folder). */
async function pidfilePath(): Promise<string | null> {
  const { agentEndpoint, ensureAgentDir } = await import('../../agent/paths.js');
  const endpoint = agentEndpoint();
  if (endpoint.dir === null) return null;
  ensureAgentDir({ dir: endpoint.dir, source: endpoint.source });
  return join(endpoint.dir, PIDFILE);
}

/**
 * Ends the helper of an earlier --clip before this one copies: its SIGTERM
 * handler clears the clipboard if it still holds the older value, and it
 * must be gone before the new value is copied (an identical value would
 * otherwise be cleared by the old helper at its own deadline). The pidfile
 * holds the pid and its start time, so a reused pid is never signalled.
 */
async function replacePrevious(path: string): Promise<void> {
  const proc = await import('../../agent/proc-info/index.js');
  const { isSameProcess, readProcInfo, signalIfSame } = proc;
  let pid = 0;
  let start = '';
  try {
    [pid, start] = ((): [number, string] => {
      const [p, s] = readFileSync(path, 'utf8').trim().split(' ');
      return [Number(p), s ?? ''];
    })();
  } catch {
    /* none */
  }
  if (Number.isInteger(pid) && pid > 0 && pid !== process.pid && start !== '') {
    try {
      if (signalIfSame(pid, start, 'SIGTERM') === 'signalled') {
        for (let i = 0; i < 150 && isSameProcess(pid, start); i++) await sleep(20);
        // Still there: it hangs, most likely in a clipboard tool, which could still clear the clipboard
        // after our copy. It leads its own session (started detached): stopped, it keeps that session id
        // reserved and starts nothing more while what runs in the session is ended (Linux), then it goes.
        if (signalIfSame(pid, start, 'SIGSTOP') === 'signalled') {
          await endSessionOf(pid, proc);
          signalIfSame(pid, start, 'SIGKILL');
        }
      }
    } catch {
      /* not ours to signal: leave it */
    }
  }
  const me = readProcInfo(process.pid);
  const tmp = `${path}.${process.pid}`;
  writeFileSync(tmp, `${process.pid} ${me?.startTime ?? ''}\n`, { mode: 0o600 });
  renameSync(tmp, path);
}

/**
 * Kills every process but the leader (stopped by the caller) in session
 * `sid`, and again while some remain (a tool may fork meanwhile), 5 passes
 * 20 ms apart at most. Each by pidfd with its start time re-checked.
 */
async function endSessionOf(sid: number, proc: typeof ProcInfo): Promise<void> {
  for (let pass = 0; pass < 5; pass++) {
    const left = proc.sessionMembers(sid).filter((p) => p.pid !== sid && p.pid !== process.pid && !p.zombie);
    if (left.length === 0) return;
    for (const p of left) {
      try {
        proc.signalIfSame(p.pid, p.startTime, 'SIGKILL');
      } catch {
        /* not ours to signal: leave it */
      }
    }
    await sleep(20);
  }
}

/** Registers the `form` activity; the token, or the reason there is none. */
async function register(): Promise<{ token: string | null; code?: string; problem?: string }> {
  try {
    const { connectAgent } = await import('../../agent/autostart.js');
    const agent = await connectAgent({ autostart: true });
    try {
      return { token: await agent.registerActivity(process.pid, 'form') };
    } finally {
      // Not held open for the wait: the agent closes idle connections, and unregister reconnects.
      agent.close();
    }
  } catch (err) {
    return { token: null, code: errorCode(err) ?? 'ERROR', problem: errorMessage(err) };
  }
}

async function unregister(token: string): Promise<void> {
  try {
    const { connectAgent } = await import('../../agent/autostart.js');
    const agent = await connectAgent({ autostart: false });
    try {
      await agent.unregisterActivity(process.pid, token);
    } finally {
      agent.close();
    }
  } catch {
    /* the agent forgets the activities of exited processes by itself */
  }
}

/**
 * Clears the clipboard unless it holds something else now (compared in constant time):
 * what the user copied since stays. A read that fails (the paste tool errs or is killed
 * at its timeout, as on a loaded machine) shows nothing else is there, so the clipboard
 * is cleared: losing a newer copy is better than leaving the secret on it. Something else
 * is read once more after a moment, and only the value then clears: under load a Wayland
 * compositor (weston, in a CI run) once answered a paste with other content while the value
 * stayed on the clipboard, and the value was never cleared. A second read that fails leaves
 * the clipboard alone: something else was seen there.
 */
async function clearIfOurs(tool: ClipboardTool, value: Buffer, trace: Trace): Promise<boolean> {
  let seen = await readAgainst(tool, value);
  if (seen === 'something else') {
    trace('read before the clear: something else; reading again');
    await new Promise((r) => setTimeout(r, CONFIRM_READ_MS));
    seen = await readAgainst(tool, value);
    if (seen !== 'the value') {
      trace(`read before the clear: ${seen === 'failed' ? 'failed, after something else' : 'something else'}`);
      return false;
    }
  }
  try {
    await tool.clear();
  } finally {
    trace(`read before the clear: ${seen}`); // after the clear: nothing about the trace may delay it
  }
  return true;
}

/** The pause before a read that saw something else is repeated. */
const CONFIRM_READ_MS = 300;

/** What one read of the clipboard saw, against the value; what it read is wiped. */
async function readAgainst(tool: ClipboardTool, value: Buffer): Promise<'failed' | 'something else' | 'the value'> {
  const now = await tool.read(value.length).catch(() => null);
  const other = now === 'longer' || (now !== null && !constantTimeEqual(now, value));
  if (Buffer.isBuffer(now)) wipe(now);
  return now === null ? 'failed' : other ? 'something else' : 'the value';
}

/** One line of the clear's progress: what each run saw, never what the clipboard held. */
type Trace = (line: string) => void;

/**
 * STASH_CLIP_TRACE=/absolute/path: the helper appends its attempts at the clear there (the
 * outcome of each read, clear and read-back, and a failed tool's first line of stderr; no
 * clipboard content), to find out why a clear did not happen on a given machine. Unset (the
 * default): nothing is written. A regular file only, opened without following a symbolic link and
 * without blocking (a FIFO with no reader must not hold up the clear).
 */
function tracer(env: NodeJS.ProcessEnv = process.env): Trace {
  const path = env.STASH_CLIP_TRACE;
  if (path === undefined || !isAbsolute(path)) return () => {};
  const flags =
    constants.O_WRONLY |
    constants.O_APPEND |
    constants.O_CREAT |
    (constants.O_NONBLOCK ?? 0) |
    (constants.O_NOFOLLOW ?? 0);
  return (line) => {
    let fd: number | undefined;
    try {
      fd = openSync(path, flags, 0o600);
      if (fstatSync(fd).isFile()) writeSync(fd, `${new Date().toISOString()} helper ${process.pid}: ${line}\n`);
    } catch {
      /* a trace that cannot be written changes nothing */
    } finally {
      if (fd !== undefined) closeSync(fd);
    }
  };
}

/**
 * Attempts at the clear: one tool run that fails must not leave the secret on the clipboard, and
 * a loaded machine (a compositor starved of CPU) may fail many in a row. They go on while none is
 * confirmed, for CLEAR_WINDOW_MS, the pauses doubling from CLEAR_PAUSE_MS up to
 * CLEAR_PAUSE_MAX_MS (at the end of the delay: 1, 2, 4, 8, 8, ... s, about ten attempts).
 */
const CLEAR_WINDOW_MS = 60_000;
const CLEAR_PAUSE_MAX_MS = 8000;
/** The first pause; shorter once a signal came, since the agent (a suspend) waits 1.5 s before SIGKILL. */
const CLEAR_PAUSE_MS = { timeout: 1000, signal: 200 };

/** The pace of the attempts: a signal that comes while they run shortens the pause under way and the next ones. */
interface Pace {
  ms: number;
  cut?: (() => void) | undefined;
}

async function pause(pace: Pace): Promise<void> {
  try {
    await new Promise<void>((resolve) => {
      let timer = setTimeout(resolve, pace.ms);
      pace.cut = () => {
        clearTimeout(timer);
        timer = setTimeout(resolve, CLEAR_PAUSE_MS.signal);
      };
    });
  } finally {
    pace.cut = undefined;
  }
}

/**
 * Clears, then reads back: a tool that failed (killed at its timeout on a
 * loaded machine, a busy compositor) or said yes and left the value gets
 * another attempt, and so does a read-back that failed (the clear is then
 * not confirmed). Once a paste got the value (`served`, or a read-back that
 * finds it) each attempt clears only if the clipboard still holds it, so
 * something the user copied meanwhile stays, and the attempts end there.
 */
async function clearUntilGone(
  tool: ClipboardTool,
  value: Buffer,
  served: boolean,
  pace: Pace,
  trace: Trace,
): Promise<void> {
  let ours = served;
  const until = performance.now() + CLEAR_WINDOW_MS; // not the wall clock, which may be set back
  for (let attempt = 1; ; attempt++) {
    const step: Trace = (line) => trace(`attempt ${attempt}: ${line}`);
    try {
      if (ours) {
        if (!(await clearIfOurs(tool, value, step))) return;
      } else {
        await tool.clear();
      }
      step('the clear ran');
      if (value.length === 0) return;
      const now = await tool.read(value.length).catch(() => null);
      const still = Buffer.isBuffer(now) && constantTimeEqual(now, value);
      if (Buffer.isBuffer(now)) wipe(now);
      step(`read-back: ${now === null ? 'failed' : still ? 'the value' : 'cleared'}`);
      if (now !== null && !still) return; // empty, or something else: cleared
      if (still) ours = true;
    } catch (err) {
      // The tool could not be run or failed: try again after the pause.
      step(`the tool failed: ${errorMessage(err).slice(0, 200)}`);
    }
    if (performance.now() + pace.ms > until) {
      step(`no clear confirmed within ${CLEAR_WINDOW_MS / 1000} s: giving up`);
      return;
    }
    await pause(pace);
    pace.ms = Math.min(pace.ms * 2, CLEAR_PAUSE_MAX_MS);
  }
}

/** One run of the helper: what the copy, the signal handlers and the clear share. */
interface ClipRun {
  value: Buffer;
  tool: ClipboardTool;
  pidfile: string | null;
  /** The activity registered with the agent, or null. */
  token: string | null;
  /** The copy under way, awaited by a clear that comes meanwhile. */
  copying: Promise<boolean> | null;
  /** A paste got the value: until then the clear at the end is unconditional (the tool's child may serve it late). */
  served: boolean;
  pace: Pace;
  finishing: boolean;
  signalled: boolean;
}

/** Runs the helper; resolves once it has copied and reported (it exits later, by itself). */
export async function runClipHelper(argv: string[]): Promise<void> {
  const args = parseArgs(argv);
  if (args === null || !isToolName(args.tool)) {
    report({
      ok: false,
      code: 'USAGE',
      message: '__clip-clear takes --tool NAME --seconds N (it is started by get --clip)',
    });
    process.exitCode = 64;
    return;
  }
  const { hardenCli } = await import('../harden.js');
  await hardenCli();
  const run = await prepare(args.tool);
  if (run === null) return;
  const finish = (why: 'timeout' | NodeJS.Signals): Promise<void> => finishRun(run, why);
  // Handlers before the copy: a suspend that comes while it runs must still clear.
  for (const sig of ['SIGTERM', 'SIGINT', 'SIGHUP'] as const) process.on(sig, () => void finish(sig));

  const registered = await register();
  run.token = registered.token;
  if (registered.code === 'AGENT_SUSPENDING') {
    wipe(run.value);
    report({ ok: false, code: 'CLIPBOARD_UNAVAILABLE', message: 'the machine is going to sleep; nothing was copied' });
    process.exit(1);
  }
  const clearLater = (): void => {
    setTimeout(() => void finish('timeout'), args.seconds * 1000);
  };
  const marked = await copyValue(run, clearLater);
  if (marked === null) return;
  report({
    ok: true,
    marked,
    registered: run.token !== null,
    ...(registered.problem ? { agentProblem: registered.problem } : {}),
  });
  clearLater();
}

/**
 * Reads the value from stdin, finds the tool and ends the helper of an earlier
 * --clip; null once a failure is reported (exit status 1).
 */
async function prepare(toolName: ToolName): Promise<ClipRun | null> {
  const { readFdSecure } = await import('../secure-read.js');
  try {
    const value = readFdSecure(0, { maxBytes: MAX_VALUE_BYTES, what: 'the value to copy', stripNewline: false });
    const tool = await clipboardTool(toolName);
    const pidfile = await pidfilePath();
    if (pidfile !== null) await replacePrevious(pidfile);
    const pace: Pace = { ms: CLEAR_PAUSE_MS.timeout };
    return {
      value,
      tool,
      pidfile,
      token: null,
      copying: null,
      served: false,
      pace,
      finishing: false,
      signalled: false,
    };
  } catch (err) {
    report({ ok: false, code: errorCode(err) ?? 'CLIPBOARD_UNAVAILABLE', message: errorMessage(err) });
    process.exitCode = 1;
    return null;
  }
}

/**
 * Copies the value: whether the tool marked it (kept from clipboard history).
 * Null when the helper goes on without a report of success: finish() is under
 * way, or the copy was not served yet (reported, the clear set for `clearLater`);
 * a copy that failed outright is reported and the helper exits (status 1).
 */
async function copyValue(run: ClipRun, clearLater: () => void): Promise<boolean | null> {
  try {
    run.copying = run.tool.copy(run.value, () => run.finishing);
    const marked = await run.copying;
    run.served = true;
    run.copying = null;
    return marked;
  } catch (err) {
    if (run.finishing) return null; // finish() is clearing and exiting
    if (err instanceof NotServedError) {
      // The tool's child may still serve the value later: say so now, and clear on time as after a copy.
      run.copying = null;
      report({ ok: false, code: err.code, message: err.message });
      clearLater();
      return null;
    }
    wipe(run.value);
    report({ ok: false, code: errorCode(err) ?? 'CLIPBOARD_UNAVAILABLE', message: errorMessage(err) });
    if (run.token !== null) await unregister(run.token);
    if (run.pidfile !== null && existsSync(run.pidfile)) unlinkSync(run.pidfile);
    process.exit(1);
  }
}

/** The end of a run, at its time or on a signal: clears, wipes the value, unregisters, removes the pidfile, exits. */
async function finishRun(run: ClipRun, why: 'timeout' | NodeJS.Signals): Promise<void> {
  if (why !== 'timeout') {
    // Also while the attempts of the timeout run: the agent or the next helper now waits for us.
    run.signalled = true;
    run.pace.ms = CLEAR_PAUSE_MS.signal;
    run.pace.cut?.();
  }
  if (run.finishing) return;
  run.finishing = true;
  // A signal during the copy: let the tool finish, or the value would land on the clipboard after we are gone.
  if (run.copying) await run.copying.catch(() => false);
  await clearUntilGone(run.tool, run.value, run.served, run.pace, tracer());
  wipe(run.value);
  // On a signal the agent (suspend) or the next helper is waiting: exit at once, the agent prunes us.
  if (!run.signalled && run.token !== null) await unregister(run.token);
  try {
    if (run.pidfile !== null && readFileSync(run.pidfile, 'utf8').startsWith(`${process.pid} `))
      unlinkSync(run.pidfile);
  } catch {
    /* replaced or gone */
  }
  process.exit(0);
}
