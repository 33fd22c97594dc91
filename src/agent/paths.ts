/**
 * Where the agent listens, and the checks that keep that place private.
 * Unix: <dir>/agent.sock with dir = STASH_SESSION_AGENT_DIR, else
 * $XDG_RUNTIME_DIR/stash, else <tmpdir>/stash-<uid>. Windows: a named pipe.
 * An agent started with another XDG_RUNTIME_DIR (su, ssh, a systemd user
 * session) may listen in one of the user's other folders: agentCandidates.
 */
import { lstatSync, mkdirSync, type Stats } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir, userInfo } from 'node:os';
import { join, resolve } from 'node:path';
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
  source: 'STASH_SESSION_AGENT_DIR' | 'XDG_RUNTIME_DIR' | 'run-user' | 'tmpdir' | 'pipe';
}

const uid = (): number => (typeof process.getuid === 'function' ? process.getuid() : -1);

/** The agent endpoint for this user and environment. */
export function agentEndpoint(
  env: NodeJS.ProcessEnv = process.env,
  platform: NodeJS.Platform = process.platform,
): Endpoint {
  const override = env.STASH_SESSION_AGENT_DIR;
  if (platform === 'win32') {
    return { dir: null, path: windowsPipeName(env.USERNAME ?? userInfo().username, override), source: 'pipe' };
  }
  if (override) return { dir: override, path: join(override, 'agent.sock'), source: 'STASH_SESSION_AGENT_DIR' };
  if (env.XDG_RUNTIME_DIR) {
    const dir = join(env.XDG_RUNTIME_DIR, 'stash');
    return { dir, path: join(dir, 'agent.sock'), source: 'XDG_RUNTIME_DIR' };
  }
  return fallbackEndpoint();
}

/** The per-user fallback: <tmpdir>/stash-<uid> (TMPDIR moves it). */
function fallbackEndpoint(): Endpoint {
  const dir = join(tmpdir(), `stash-${uid()}`);
  return { dir, path: join(dir, 'agent.sock'), source: 'tmpdir' };
}

/**
 * The uid's login runtime folder, which pam_systemd creates and sets
 * XDG_RUNTIME_DIR to: /run/user/<uid>. STASH_RUN_USER_DIR replaces it, so a
 * test never looks into this machine's real one.
 */
export function runUserDir(env: NodeJS.ProcessEnv = process.env): string {
  return env.STASH_RUN_USER_DIR || `/run/user/${uid()}`;
}

/**
 * Every endpoint where an agent of this user may listen, the environment's
 * own (agentEndpoint) first, then the uid's runtime folder and the fallback:
 * a shell with XDG_RUNTIME_DIR set and one without it (su, ssh) name
 * different folders for the same user. STASH_SESSION_AGENT_DIR is a choice
 * of place, so with it set (and on Windows, where the pipe name has no
 * folder) the list is that one endpoint.
 */
export function agentCandidates(
  env: NodeJS.ProcessEnv = process.env,
  platform: NodeJS.Platform = process.platform,
): Endpoint[] {
  const own = agentEndpoint(env, platform);
  if (own.source === 'STASH_SESSION_AGENT_DIR' || own.source === 'pipe') return [own];
  const dir = join(runUserDir(env), 'stash');
  const all = [own, { dir, path: join(dir, 'agent.sock'), source: 'run-user' } as Endpoint, fallbackEndpoint()];
  const seen = new Set<string>();
  return all.filter((e) => {
    const key = resolve(e.dir ?? e.path);
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
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
  /** True when the folder is ours and only its mode is wrong: chmod can repair it. */
  repairable: boolean;
}

/** Inspects the socket folder without changing it. */
export function checkAgentDir(dir: string): DirCheck {
  let st: Stats;
  try {
    st = lstatSync(dir);
  } catch {
    return { ok: true, exists: false, mode: null, owner: null, problem: null, repairable: false };
  }
  const mode = st.mode & 0o777;
  const base = { exists: true, mode, owner: st.uid, repairable: false };
  if (uid() >= 0 && st.uid !== uid())
    return { ...base, ok: false, problem: `${dir} is owned by uid ${st.uid}, not by you (uid ${uid()})` };
  if (!st.isDirectory())
    return { ...base, ok: false, problem: `${dir} is ${st.isSymbolicLink() ? 'a symbolic link' : 'not a directory'}` };
  if ((mode & 0o077) !== 0)
    return {
      ...base,
      ok: false,
      repairable: true,
      problem: `${dir} has mode ${mode.toString(8).padStart(4, '0')}; it must be 0700`,
    };
  return { ...base, ok: true, problem: null };
}

/**
 * What the user can do about an unsafe socket folder. chmod repairs only a
 * folder of their own; one that another user owns (someone may have created
 * it first to catch the agent's socket, the classic squat on a shared /tmp)
 * or that is not a folder cannot be repaired by its victim, so the advice is
 * to put the agent somewhere else.
 */
export function agentDirFix(endpoint: Pick<Endpoint, 'dir' | 'source'>, check: DirCheck): string {
  const dir = endpoint.dir ?? '';
  if (check.repairable) return `check the contents of ${dir}, then: chmod 700 ${dir}`;
  if (check.owner !== null && uid() >= 0 && check.owner === uid())
    return `look at what ${dir} is, remove it, and try again`;
  const elsewhere =
    endpoint.source === 'STASH_SESSION_AGENT_DIR'
      ? 'set STASH_SESSION_AGENT_DIR to a folder only you can enter'
      : `set XDG_RUNTIME_DIR (your login session's private folder, usually /run/user/${uid()}) or STASH_SESSION_AGENT_DIR to a folder only you can enter`;
  return `you cannot repair a folder another user controls (it may have been put there to catch your agent's socket): ${elsewhere}, and tell the machine's administrator`;
}

/** The whole refusal, as ensureAgentDir and connectAgent throw it. */
export function unsafeAgentDirError(endpoint: Pick<Endpoint, 'dir' | 'source'>, check: DirCheck): AgentPathError {
  const fix = check.repairable
    ? `Check its contents, then fix it with: chmod 700 ${endpoint.dir ?? ''}`
    : capitalise(agentDirFix(endpoint, check));
  return new AgentPathError(`unsafe agent socket folder: ${check.problem}. ${fix}`);
}

const capitalise = (s: string): string => s.charAt(0).toUpperCase() + s.slice(1);

/**
 * Creates the socket folder 0700, or accepts an existing one that is ours and
 * private. A folder open to group/others, owned by someone else, or not a
 * directory is refused, not repaired: something may already have been planted
 * in it, and the user should look before trusting it again.
 */
export function ensureAgentDir(endpoint: Pick<Endpoint, 'dir' | 'source'> & { dir: string }): void {
  const { dir } = endpoint;
  // Checked before mkdir too: mkdir -p through another user's symlink would touch their folder.
  let check = checkAgentDir(dir);
  if (check.ok && !check.exists) {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    check = checkAgentDir(dir);
  }
  if (!check.ok) throw unsafeAgentDirError(endpoint, check);
}
