/**
 * Where the agent listens, and the checks that keep that place private.
 * Unix: <dir>/agent.sock with dir = STASH_SESSION_AGENT_DIR, else
 * $XDG_RUNTIME_DIR/stash, else <tmpdir>/stash-<uid>. Windows: a named pipe.
 */
import { lstatSync, mkdirSync, type Stats } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { StashError } from '../errors.js';

export class AgentPathError extends StashError {
  constructor(message: string) {
    super('AGENT_UNSAFE_DIR', message);
  }
}

export interface Endpoint {
  /** The folder that holds the socket (Unix), or null on Windows. */
  dir: string | null;
  /** Socket path or pipe name, as given to net.connect/listen. */
  path: string;
  /** Where the folder choice came from, for diagnostics. */
  source: 'STASH_SESSION_AGENT_DIR' | 'XDG_RUNTIME_DIR' | 'tmpdir' | 'pipe';
}

const uid = (): number => (typeof process.getuid === 'function' ? process.getuid() : -1);

/** The agent endpoint for this user and environment. */
export function agentEndpoint(env: NodeJS.ProcessEnv = process.env, platform: NodeJS.Platform = process.platform): Endpoint {
  const override = env.STASH_SESSION_AGENT_DIR;
  if (platform === 'win32') {
    return { dir: null, path: windowsPipeName(env.USERNAME ?? userInfo().username, override), source: 'pipe' };
  }
  if (override) return { dir: override, path: join(override, 'agent.sock'), source: 'STASH_SESSION_AGENT_DIR' };
  if (env.XDG_RUNTIME_DIR) {
    const dir = join(env.XDG_RUNTIME_DIR, 'stash');
    return { dir, path: join(dir, 'agent.sock'), source: 'XDG_RUNTIME_DIR' };
  }
  const dir = join(tmpdir(), `stash-${uid()}`);
  return { dir, path: join(dir, 'agent.sock'), source: 'tmpdir' };
}

/**
 * The agent's pipe name on Windows: `\\.\pipe\stash-agent-<scope>`, scope = the user
 * name (characters outside `[A-Za-z0-9_.-]` become `_`, at most 64 kept) and,
 * when STASH_SESSION_AGENT_DIR is set, `-` and the first 16 hex digits of the
 * SHA-256 of its value. The name only keeps users and test folders apart; who
 * may use the pipe is decided by its DACL and the SID checks (windows-pipe.ts).
 */
export function windowsPipeName(user: string, agentDir?: string): string {
  // node:crypto is required here, not imported: it costs a few ms to load, and `stash get` on Unix never needs it.
  const { createHash } = createRequire(import.meta.url)('node:crypto') as typeof import('node:crypto');
  const safeUser = user.replace(/[^A-Za-z0-9_.-]/g, '_').slice(0, 64) || '_';
  const scope = agentDir ? `${safeUser}-${createHash('sha256').update(agentDir).digest('hex').slice(0, 16)}` : safeUser;
  return `\\\\.\\pipe\\stash-agent-${scope}`;
}

export interface DirCheck {
  ok: boolean;
  exists: boolean;
  mode: number | null;
  owner: number | null;
  problem: string | null;
}

/** Inspects the socket folder without changing it. */
export function checkAgentDir(dir: string): DirCheck {
  let st: Stats;
  try {
    st = lstatSync(dir);
  } catch {
    return { ok: true, exists: false, mode: null, owner: null, problem: null };
  }
  const mode = st.mode & 0o777;
  const base = { exists: true, mode, owner: st.uid };
  if (!st.isDirectory()) return { ...base, ok: false, problem: `${dir} is not a directory` };
  if (uid() >= 0 && st.uid !== uid()) return { ...base, ok: false, problem: `${dir} is owned by uid ${st.uid}, not by you (uid ${uid()})` };
  if ((mode & 0o077) !== 0) return { ...base, ok: false, problem: `${dir} has mode ${mode.toString(8).padStart(4, '0')}; it must be 0700` };
  return { ...base, ok: true, problem: null };
}

/**
 * Creates the socket folder 0700, or accepts an existing one that is ours and
 * private. A folder open to group/others, owned by someone else, or not a
 * directory is refused, not repaired: something may already have been planted
 * in it, and the user should look before trusting it again.
 */
export function ensureAgentDir(dir: string): void {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const check = checkAgentDir(dir);
  if (!check.ok) {
    throw new AgentPathError(`unsafe agent socket folder: ${check.problem}. Check its contents, then fix it with: chmod 700 ${dir}`);
  }
}
