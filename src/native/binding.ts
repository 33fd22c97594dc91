/**
 * The one place that loads the native addon. Everything else imports the
 * typed wrappers in ./index.ts, never the .node file.
 */
import { createRequire } from 'node:module';
import { existsSync, readdirSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { NativeError, errorMessage } from '../errors.js';

export interface PeerCredentials {
  pid: number;
  uid: number;
  gid: number;
}

export interface ResourceLimit {
  /** -1 means unlimited. */
  soft: number;
  hard: number;
}

export interface ProcessPosture {
  /** Linux: prctl(PR_GET_DUMPABLE); macOS/Windows: not yet hardened. */
  dumpable: boolean;
  /** null where the platform has no such limit (Windows). */
  coreLimit: ResourceLimit | null;
  memlockLimit: ResourceLimit | null;
}

export interface HardenReport extends ProcessPosture {
  actions: string[];
  coreDumpsDisabled: boolean;
  ptraceBlocked: boolean;
}

/** powerProbe(): can this platform's power backend be used, and if not, why. */
export interface NativePowerProbe {
  available: boolean;
  backend: 'logind' | 'iokit' | 'windows';
  /** The loaded library (libsystemd.so.0 / libelogind.so.0, IOKit, powrprof.dll); null when none loaded. */
  library: string | null;
  /** Linux: the unique bus name owning org.freedesktop.login1. */
  owner: string | null;
  reason: string | null;
}

/** What a PowerWatcher reports, on the JS thread. */
export type NativePowerEvent =
  /** The watcher listens; `owner` is logind's unique bus name (Linux) or null. */
  | { type: 'ready'; owner: string | null }
  /**
   * start=true: the system is about to sleep; false: it resumed. `id` (macOS, Windows) goes to allowSleep.
   * `at` (Linux): CLOCK_MONOTONIC microseconds when the signal was read off the bus, comparable with
   * process.hrtime.bigint() / 1000n.
   */
  | { type: 'sleep'; start: boolean; sender: string | null; id?: number; at?: number }
  /** Linux: org.freedesktop.login1 changed hands (logind restarted) or left the bus (null). */
  | { type: 'owner'; owner: string | null }
  /** Linux: a PrepareForSleep from a connection that does not own org.freedesktop.login1. */
  | { type: 'ignored'; sender: string | null }
  /** The watcher failed and has stopped listening. */
  | { type: 'error'; code: string; message: string };

export interface NativePowerWatcher {
  /** Stops listening and joins the thread; idempotent. */
  stop(): void;
  /** macOS/Windows: let the announced sleep `id` proceed. Linux: no-op (false), the delay lock is an fd. */
  allowSleep(id: number): boolean;
}

/**
 * What a LockWatcher reports, on the JS thread (native/common/lock_event.h).
 * `source` is the one the watcher was made for: 'logind' or 'screensaver'
 * (Linux), 'wts' (Windows), 'distributed' (macOS).
 */
export type NativeLockEvent =
  /** Listening. Linux logind: `owner` is logind's unique name, `session` the session object; `locked` null when unknown. */
  | { type: 'ready'; source: string; owner: string | null; session: string | null; locked: boolean | null }
  /**
   * The session locked (true) or unlocked (false). `signal` names what said so (Lock, Unlock,
   * LockedHint, org.gnome.ScreenSaver.ActiveChanged, WTS_SESSION_LOCK, com.apple.screenIsLocked...);
   * `at`: microseconds on process.hrtime's clock when it was read (Linux), else 0.
   */
  | { type: 'lock'; source: string; locked: boolean; signal: string; sender: string | null; at: number }
  /** A signal from a sender that does not own the name it speaks for: not believed. */
  | { type: 'ignored'; source: string; signal: string; sender: string | null }
  /** A watched bus name changed hands (`owner` null: it left the bus). */
  | { type: 'owner'; source: string; name: string; owner: string | null }
  /** The watcher failed and has stopped listening. */
  | { type: 'error'; source: string; code: string; message: string };

export interface NativeLockWatcher {
  /** Stops listening (joins its thread, unregisters); idempotent. */
  stop(): void;
  /** macOS: runs the main thread's CFRunLoop once, where distributed notifications are delivered; false elsewhere. */
  pump(): boolean;
}

/** macOS/Windows process identity (Linux reads /proc instead). */
export interface NativeProcessInfo {
  ppid: number;
  /** Opaque, comparable for equality only (macOS "sec.usec", Windows FILETIME). */
  startTime: string;
  zombie: boolean;
}

/** Windows: what a PipeServer reports, on the JS thread. */
export type NativePipeEvent =
  /** A client of our own user connected; `fd` is a CRT descriptor for `new net.Socket({fd})`. */
  | { type: 'connection'; fd: number; pid: number }
  /** A client was disconnected before any byte was read: its process does not run as our user. */
  | { type: 'refused'; pid: number; reason: string }
  /** The accept thread stopped (ConnectNamedPipe or the next CreateNamedPipe failed). */
  | { type: 'error'; code: string; message: string };

/** Windows: the server side of the agent's named pipe (native/windows/pipe_windows.cc). */
export interface NativePipeServer {
  /** Stops accepting and closes the waiting instance; connections already handed over stay open. Idempotent. */
  close(): void;
}

/** Windows: a verified client end of the pipe, and the pid of the process serving it. */
export interface NativePipeConnection {
  fd: number;
  pid: number;
}

/** Windows: what consoleReadLine reads (native/windows/console_windows.cc). */
export interface NativeConsoleReadOptions {
  /** Written to CONOUT$ once echo is set as asked. */
  prompt: string;
  /** Receives the line as UTF-8 (no CR LF); its length is the most accepted (E2BIG beyond). */
  into: Buffer;
  /** false: ENABLE_ECHO_INPUT off for the read (a hidden prompt). */
  echo: boolean;
  /** Flush what was typed before the prompt (FlushConsoleInputBuffer) and say so with discardedNotice. */
  discardTypeAhead: boolean;
  discardedNotice: string;
}

export interface NativeConsoleRead {
  /** Bytes of the line in `into`. */
  length: number;
  /** A key had been typed before the prompt and was dropped. */
  discarded: boolean;
}

/** The raw binding, exactly as native/common/addon.cc exports it. */
export interface NativeBinding {
  platform: 'linux' | 'darwin' | 'win32';
  abi: number;
  peerCredentials(fd: number): PeerCredentials;
  hardenProcess(): HardenReport;
  processPosture(): ProcessPosture;
  openSystemLog(ident: string): void;
  systemLog(level: number, message: string): void;
  closeSystemLog(): void;
  powerProbe(): Promise<NativePowerProbe>;
  /** Linux: resolves with the inhibitor fd. macOS/Windows: 'block' only, resolves with an assertion/request id. */
  powerInhibit(what: string, who: string, why: string, mode: 'block' | 'delay'): Promise<number>;
  /** Linux: close(fd). macOS: IOPMAssertionRelease. Windows: PowerClearRequest + CloseHandle. */
  powerRelease(handle: number): void;
  PowerWatcher: new (callback: (event: NativePowerEvent) => void) => NativePowerWatcher;
  /** Throws EINVAL for a source this platform has not, ELIBACC without sd-bus (Linux). */
  LockWatcher?: new (
    options: { source: string; sessionId: string | null },
    callback: (event: NativeLockEvent) => void,
  ) => NativeLockWatcher;
  /** macOS and Windows only. */
  processInfo?(pid: number): NativeProcessInfo | null;
  /** Linux only: pidfd_open(pid, 0). */
  pidfdOpen?(pid: number): number;
  /** Linux only: pidfd_send_signal(fd, signal, NULL, 0). */
  pidfdSendSignal?(fd: number, signal: number): void;
  /**
   * Windows only: claims the pipe `name` (FILE_FLAG_FIRST_PIPE_INSTANCE, owner-only DACL,
   * PIPE_REJECT_REMOTE_CLIENTS) and accepts clients whose token user is ours.
   * Throws EADDRINUSE when the name already exists.
   */
  PipeServer?: new (
    name: string,
    callback: (event: NativePipeEvent) => void,
  ) => NativePipeServer;
  /**
   * Windows only: opens the client end (SECURITY_IDENTIFICATION) and resolves only if the
   * serving process runs as our user. Rejects ENOENT (no such pipe), EACCES (its DACL shuts
   * us out), EPERM (served by another user), ETIMEDOUT (every instance busy), WIN32_<n>.
   */
  pipeConnect?(name: string, timeoutMs: number): Promise<NativePipeConnection>;
  /** Windows only: CONIN$ opens and is a console input buffer. */
  hasConsole?(): boolean;
  /**
   * Windows only: one line from the console in line mode, echo as asked, with Ctrl-C and
   * Ctrl-Break cancelling; the mode is restored in every case. Rejects ENOTTY (no console),
   * ECANCELED (Ctrl-C, Ctrl-Break), EOF, E2BIG (longer than `into`), EILSEQ, EBUSY, WIN32_<n>.
   */
  consoleReadLine?(options: NativeConsoleReadOptions): Promise<NativeConsoleRead>;
  /**
   * Linux and macOS: the blocking agent client of short-lived commands
   * (native/common/sync_socket_posix.cc, src/agent/transport-blocking.ts).
   * Failures throw errno-coded errors (ENOENT, ECONNREFUSED, EPIPE, ETIMEDOUT, ...).
   */
  unixConnect?(path: string): number;
  socketSend?(fd: number, data: Buffer): void;
  /** Bytes read into `into`; 0 when the peer closed. Throws ETIMEDOUT after timeoutMs without a byte. */
  socketReceive?(fd: number, into: Buffer, timeoutMs: number): number;
  /** True when the peer closed or reset the connection; never waits, consumes nothing. */
  socketPeerClosed?(fd: number): boolean;
  closeFd?(fd: number): void;
  isTerminal?(fd: number): boolean;
}

/** The package root: this file sits in src/native or dist/native. */
export const packageRoot = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');

let cached: NativeBinding | undefined;

/** Where node-gyp-build looks first: the addon built here, then this platform's prebuilds. */
const builtAddon = join(packageRoot, 'build', 'Release', 'stash_native.node');
const prebuildDir = join(packageRoot, 'prebuilds', `${process.platform}-${process.arch}`);

function candidates(): string[] {
  const out = [builtAddon];
  if (existsSync(prebuildDir)) {
    for (const name of readdirSync(prebuildDir)) if (name.endsWith('.node')) out.push(join(prebuildDir, name));
  } else {
    out.push(join(prebuildDir, '*.node'));
  }
  return out;
}

/**
 * The two files node-gyp-build would find first on an ordinary install
 * (build/Release/stash_native.node, then the untagged prebuild of this
 * platform), loaded without it: node-gyp-build reads package.json, lists
 * folders and parses tags on every run, a few milliseconds of a `stash get`.
 * With PREBUILDS_ONLY or STASH_VAULT_PREBUILD set (node-gyp-build's own
 * overrides), or when neither file exists or loads, node-gyp-build decides.
 */
function loadDirect(require: NodeRequire): NativeBinding | undefined {
  if (process.env.PREBUILDS_ONLY || process.env.STASH_VAULT_PREBUILD) return undefined;
  for (const file of [builtAddon, join(prebuildDir, 'node.napi.node')]) {
    if (!existsSync(file)) continue;
    try {
      return require(file) as NativeBinding;
    } catch {
      return undefined;
    }
  }
  return undefined;
}

/**
 * Loads the addon once (build/Release first, then
 * prebuilds/<platform>-<arch>/, as node-gyp-build does). Throws NativeError
 * naming the files looked for and how to build them.
 */
export function loadBinding(): NativeBinding {
  if (cached) return cached;
  const require = createRequire(import.meta.url);
  cached = loadDirect(require);
  if (cached) return cached;
  try {
    const nodeGypBuild = require('node-gyp-build') as (dir: string) => unknown;
    cached = nodeGypBuild(packageRoot) as NativeBinding;
    return cached;
  } catch (err) {
    throw new NativeError(
      'NATIVE_UNAVAILABLE',
      `the stash native addon could not be loaded (${errorMessage(err)}). ` +
        `Looked for: ${candidates().join(', ')}. ` +
        'Build it with `npm run build:native` (needs python3, make and a C++ compiler), ' +
        'or install a package that ships prebuilds/.',
      { cause: err },
    );
  }
}
