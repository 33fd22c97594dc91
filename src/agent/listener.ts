/**
 * Claiming the agent's endpoint. Exactly one agent may own it: binding is
 * atomic, a live owner is left alone, and a stale socket file (from an agent
 * that died) is replaced only under a short-lived lock folder so that two new
 * agents cannot both remove it.
 */
import { lstatSync, mkdirSync, rmSync, statSync, unlinkSync, chmodSync } from 'node:fs';
import { createServer, connect, type Server, type Socket } from 'node:net';
import { StashError } from '../errors.js';

export class AgentRunningError extends StashError {
  constructor(path: string) {
    super('AGENT_RUNNING', `another agent already serves ${path}`);
  }
}

/** True when something accepts connections at `path`. */
export function probe(path: string, timeoutMs = 500): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(path);
    const done = (alive: boolean): void => {
      clearTimeout(timer);
      socket.destroy();
      resolve(alive);
    };
    const timer = setTimeout(() => done(true), timeoutMs); // a slow but present listener counts as alive
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
  });
}

function listenOnce(server: Server, path: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const onError = (err: Error): void => {
      server.off('listening', onListening);
      reject(err);
    };
    const onListening = (): void => {
      server.off('error', onError);
      resolve();
    };
    server.once('error', onError);
    server.once('listening', onListening);
    server.listen(path);
  });
}

/** What claimEndpoint returns: a net.Server (Unix) or the native pipe listener (Windows). */
export interface Listening {
  close(): void;
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/**
 * Listens on `path`, replacing a stale socket file. Throws AgentRunningError
 * when a live agent already owns it. Returns the server and the socket file's
 * inode (to notice later if the file is removed or replaced).
 */
export async function claimEndpoint(
  path: string,
  onConnection: (s: Socket, peerPid?: number) => void,
  onRefused?: (pid: number, reason: string) => void,
): Promise<{ server: Listening; inode: number | null }> {
  if (process.platform === 'win32')
    return { server: await claimWindowsPipe(path, onConnection, onRefused), inode: null };
  const server = createServer({ pauseOnConnect: false }, onConnection);
  for (let attempt = 0; attempt < 20; attempt++) {
    try {
      // The socket file is born owner-only (umask), not chmod-ed after the fact.
      const oldMask = process.umask(0o177);
      try {
        await listenOnce(server, path);
      } finally {
        process.umask(oldMask);
      }
      return { server, inode: ownSocketInode(path) };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EADDRINUSE') throw err;
    }
    // The file judged stale below must be this one: another agent starting now may replace it meanwhile.
    const suspect = inodeOf(path);
    if (await probe(path)) throw new AgentRunningError(path);
    // Between another agent's bind() and listen() a connect is refused too:
    // look twice before calling the socket stale.
    await sleep(30);
    if (await probe(path)) throw new AgentRunningError(path);
    const lock = `${path}.lock`;
    try {
      mkdirSync(lock, { mode: 0o700 });
    } catch {
      // Someone else is replacing it; a lock older than 10 s belongs to a dead agent.
      try {
        if (Date.now() - lstatSync(lock).mtimeMs > 10_000) rmSync(lock, { recursive: true, force: true });
      } catch {
        /* gone already */
      }
      await sleep(20 + Math.random() * 30);
      continue;
    }
    try {
      if (!(await probe(path)) && suspect !== null && inodeOf(path) === suspect) {
        try {
          unlinkSync(path);
        } catch {
          /* already gone */
        }
      }
    } finally {
      rmSync(lock, { recursive: true, force: true });
    }
  }
  throw new StashError('AGENT_UNAVAILABLE', `could not claim ${path} after repeated attempts`);
}

/**
 * Windows: the addon claims the pipe name with FILE_FLAG_FIRST_PIPE_INSTANCE,
 * so a name that exists already (another agent, or a process that took it
 * first) is refused at once; there is no stale file to replace. Each client's
 * pid reaches onConnection after the addon checked that it runs as our user.
 */
async function claimWindowsPipe(
  path: string,
  onConnection: (s: Socket, peerPid: number) => void,
  onRefused?: (pid: number, reason: string) => void,
): Promise<Listening> {
  const { listenWindowsPipe } = await import('./windows-pipe.js');
  try {
    const listener = await listenWindowsPipe(path, onConnection);
    if (onRefused) listener.on('refused', onRefused);
    return listener;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EADDRINUSE') throw new AgentRunningError(path);
    throw err;
  }
}

/**
 * The inode of the socket file just bound, made owner-only. If someone removed
 * it in the instant after bind, returns -1: the caller's watch then sees a
 * socket that is no longer ours and shuts down cleanly instead of failing.
 */
function ownSocketInode(path: string): number {
  try {
    chmodSync(path, 0o600);
    return statSync(path).ino;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return -1;
    throw err;
  }
}

/** The inode of the file at `path`, or null when there is none. */
function inodeOf(path: string): number | null {
  try {
    return lstatSync(path).ino;
  } catch {
    return null;
  }
}

/** True while `path` is still the socket file we created (not removed or replaced). */
export function stillOurs(path: string, inode: number | null): boolean {
  if (inode === null) return true;
  try {
    const st = lstatSync(path);
    return st.isSocket() && st.ino === inode;
  } catch {
    return false;
  }
}
