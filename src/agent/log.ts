/**
 * The agent's log. STASH_SESSION_AGENT_LOG names a file; otherwise the system
 * log (syslog on Unix, Event Log source "stash Agent" on Windows), falling back
 * to a file under the user's local state folder when there is no system log.
 *
 * Callers pass only text they composed: never key bytes, tokens or passwords.
 * Every logger is rate limited (log-limit.ts); a log file is rotated once it
 * passes MAX_LOG_BYTES (one older file kept, agent.log.1).
 */
import { appendFileSync, existsSync, mkdirSync, openSync, closeSync, fstatSync, renameSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';
import { RateLimitedLogger } from './log-limit.js';

export type Level = 'info' | 'warning' | 'error';

export interface Logger {
  readonly target: string;
  log(level: Level, message: string): void;
  /** Writes out what is held back (counts of rate-limited lines); called when the agent exits. */
  flush?(): void;
}

/** A log file past this size is renamed to FILE.1 (replacing an older one) and started afresh. */
export const MAX_LOG_BYTES = 1024 * 1024;

/** The fallback log file: $XDG_STATE_HOME/stash/agent.log, else ~/.local/state/stash/agent.log (%LOCALAPPDATA% on Windows). */
export function fallbackLogPath(env: NodeJS.ProcessEnv = process.env): string {
  if (process.platform === 'win32')
    return join(env.LOCALAPPDATA ?? join(homedir(), 'AppData', 'Local'), 'stash', 'agent.log');
  if (process.platform === 'darwin') return join(homedir(), 'Library', 'Logs', 'stash', 'agent.log');
  return join(env.XDG_STATE_HOME || join(homedir(), '.local', 'state'), 'stash', 'agent.log');
}

class FileLogger implements Logger {
  readonly target: string;
  private size: number;

  constructor(
    private readonly path: string,
    private readonly maxBytes = MAX_LOG_BYTES,
  ) {
    this.target = `file ${path}`;
    mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
    const fd = openSync(path, 'a', 0o600);
    try {
      this.size = fstatSync(fd).size;
    } finally {
      closeSync(fd);
    }
  }

  log(level: Level, message: string): void {
    const line = `${new Date().toISOString()} stash-agent[${process.pid}] ${level}: ${oneLine(message)}\n`;
    try {
      if (this.size > 0 && this.size + Buffer.byteLength(line) > this.maxBytes) {
        // Rotate once: the file and one older one bound what the log takes on disk.
        renameSync(this.path, `${this.path}.1`);
        this.size = 0;
      }
      appendFileSync(this.path, line, { mode: 0o600 });
      this.size += Buffer.byteLength(line);
    } catch {
      // A full disk must not take the agent down; the log is best effort.
    }
  }
}

class SystemLogger implements Logger {
  readonly target: string;

  constructor(private readonly native: typeof import('../native/index.js')) {
    this.target = process.platform === 'win32' ? 'Windows Event Log (stash Agent)' : 'syslog';
    native.openSystemLog(process.platform === 'win32' ? 'stash Agent' : 'stash-agent');
  }

  log(level: Level, message: string): void {
    try {
      this.native.systemLog(level, oneLine(message));
    } catch {
      // best effort, as above
    }
  }
}

function oneLine(message: string): string {
  return message.replace(/[\r\n]+/g, ' ').slice(0, 2000);
}

function systemLogPresent(): boolean {
  if (process.platform === 'linux') return existsSync('/dev/log');
  if (process.platform === 'darwin') return existsSync('/var/run/syslog');
  return true;
}

/**
 * Where an agent started with `env` logs, in words for a person (messages
 * that say "see its log"). Mirrors createLogger without opening anything.
 */
export function describeLogTarget(env: NodeJS.ProcessEnv = process.env): string {
  if (env.STASH_SESSION_AGENT_LOG) return `the file ${env.STASH_SESSION_AGENT_LOG} (STASH_SESSION_AGENT_LOG)`;
  if (process.platform === 'win32') return 'the Windows Event Log, source "stash Agent"';
  const file = fallbackLogPath(env);
  // The agent falls back to the file when it cannot open the system log (no addon, say).
  if (systemLogPresent()) return `the system log (syslog, identity stash-agent), or ${file} when that cannot be opened`;
  return file;
}

/** Picks the log target for this environment; rate limited (log-limit.ts). */
export async function createLogger(
  env: NodeJS.ProcessEnv = process.env,
  opts: { maxBytes?: number } = {},
): Promise<Logger> {
  const explicit = env.STASH_SESSION_AGENT_LOG;
  if (explicit) return new RateLimitedLogger(new FileLogger(explicit, opts.maxBytes));
  if (systemLogPresent()) {
    try {
      return new RateLimitedLogger(new SystemLogger(await import('../native/index.js')));
    } catch {
      // no addon or no system log: fall through to the file
    }
  }
  return new RateLimitedLogger(new FileLogger(fallbackLogPath(env), opts.maxBytes));
}
