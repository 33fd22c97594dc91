/**
 * The agent's log. STASH_SESSION_AGENT_LOG names a file; otherwise the system
 * log (syslog on Unix, Event Log source "stash Agent" on Windows), falling back
 * to a file under the user's local state folder when there is no system log.
 *
 * Callers pass only text they composed: never key bytes, tokens or passwords.
 */
import { appendFileSync, existsSync, mkdirSync, openSync, closeSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';

export type Level = 'info' | 'warning' | 'error';

export interface Logger {
  readonly target: string;
  log(level: Level, message: string): void;
}

/** The fallback log file: $XDG_STATE_HOME/stash/agent.log, else ~/.local/state/stash/agent.log (%LOCALAPPDATA% on Windows). */
export function fallbackLogPath(env: NodeJS.ProcessEnv = process.env): string {
  if (process.platform === 'win32') return join(env.LOCALAPPDATA ?? join(homedir(), 'AppData', 'Local'), 'stash', 'agent.log');
  if (process.platform === 'darwin') return join(homedir(), 'Library', 'Logs', 'stash', 'agent.log');
  return join(env.XDG_STATE_HOME || join(homedir(), '.local', 'state'), 'stash', 'agent.log');
}

class FileLogger implements Logger {
  readonly target: string;

  constructor(private readonly path: string) {
    this.target = `file ${path}`;
    mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
    closeSync(openSync(path, 'a', 0o600));
  }

  log(level: Level, message: string): void {
    try {
      appendFileSync(this.path, `${new Date().toISOString()} stash-agent[${process.pid}] ${level}: ${oneLine(message)}\n`, { mode: 0o600 });
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

/** Picks the log target for this environment. */
export async function createLogger(env: NodeJS.ProcessEnv = process.env): Promise<Logger> {
  const explicit = env.STASH_SESSION_AGENT_LOG;
  if (explicit) return new FileLogger(explicit);
  if (systemLogPresent()) {
    try {
      return new SystemLogger(await import('../native/index.js'));
    } catch {
      // no addon or no system log: fall through to the file
    }
  }
  return new FileLogger(fallbackLogPath(env));
}
