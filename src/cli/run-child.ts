/**
 * Running a command that holds secrets (`stash env`, `stash run`): the child
 * gets its environment, an `env` activity is registered for its pid (the agent
 * accepts a descendant of the caller), so the machine is kept awake for it and
 * it is terminated on suspend when so configured. SIGINT, SIGTERM and SIGHUP
 * are passed on to the child; the exit status is the child's, or 128+N when
 * signal N killed it. With `mask`, the child's stdout and stderr pass through
 * stash and every secret value in them is replaced (mask-stream.ts).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { constants } from 'node:os';
import { StashError, errorCode, errorMessage } from '../errors.js';
import { Concealer } from './mask-stream.js';
import { warn } from './output.js';
import type { Session } from './session.js';

const FORWARDED = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;

export interface ChildOptions {
  /** Secret values to conceal in the child's output (null: the child writes to our stdout/stderr directly). */
  mask: readonly Buffer[] | null;
}

function spawnChild(cmd: string, args: string[], env: NodeJS.ProcessEnv, masked: boolean): Promise<ChildProcess> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { stdio: masked ? ['inherit', 'pipe', 'pipe'] : 'inherit', env });
    child.once('spawn', () => resolve(child));
    child.once('error', (err: NodeJS.ErrnoException) => {
      if (err.code === 'ENOENT') reject(new StashError('COMMAND_NOT_FOUND', `${cmd}: command not found`));
      else if (err.code === 'EACCES') reject(new StashError('COMMAND_NOT_EXECUTABLE', `${cmd}: permission denied`));
      else reject(new StashError('COMMAND_FAILED', `cannot run ${cmd}: ${err.message}`));
    });
  });
}

/**
 * Spawns `cmd` with `env` and waits for it; returns its exit status. The
 * caller drops its own reference to `env` once this resolves the spawn; the
 * session's agent connection is closed while the child runs.
 */
export async function runChild(
  session: Session,
  cmd: string,
  args: string[],
  envIn: NodeJS.ProcessEnv,
  opts: ChildOptions = { mask: null },
): Promise<number> {
  let env: NodeJS.ProcessEnv | null = envIn;
  // Handlers go in before the spawn: a signal in between must not kill us and orphan the child.
  const pending: NodeJS.Signals[] = [];
  let child: ChildProcess | null = null;
  const relay = (sig: NodeJS.Signals): void => {
    if (child?.pid !== undefined && child.exitCode === null) child.kill(sig);
    else pending.push(sig);
  };
  for (const sig of FORWARDED) process.on(sig, relay);
  let spawned: ChildProcess;
  try {
    spawned = await spawnChild(cmd, args, env, opts.mask !== null);
  } catch (err) {
    for (const sig of FORWARDED) process.removeListener(sig, relay);
    throw err;
  }
  child = spawned;
  env = null;
  for (const sig of pending) spawned.kill(sig);
  const piped = opts.mask !== null ? pipeMasked(spawned, opts.mask) : Promise.resolve();
  const exit = once(spawned, 'exit') as Promise<[number | null, NodeJS.Signals | null]>;
  const token = await registerChild(session, spawned);
  // The connection is not kept open for the child's lifetime (the agent
  // drops idle connections); unregistering uses a fresh one.
  session.close();
  const [code, signal] = await exit;
  await piped;
  for (const sig of FORWARDED) process.removeListener(sig, relay);
  if (token !== null) await unregisterChild(spawned.pid!, token);
  if (signal !== null) return 128 + (constants.signals[signal] ?? 0);
  return code ?? 1;
}

/**
 * Copies the child's stdout and stderr to ours with every secret concealed.
 * The listeners go on synchronously, right after the spawn: Node drains (and
 * drops) the output of a child that exits while nobody reads its pipes.
 */
function pipeMasked(child: ChildProcess, secrets: readonly Buffer[]): Promise<void> {
  const copy = (from: NodeJS.ReadableStream | null, to: NodeJS.WritableStream): Promise<void> =>
    new Promise((resolve) => {
      if (!from) return resolve();
      const concealer = new Concealer(secrets);
      from.on('data', (chunk: Buffer) => to.write(concealer.push(chunk)));
      from.on('end', () => {
        to.write(concealer.end());
        resolve();
      });
      from.on('error', () => resolve());
    });
  return Promise.all([copy(child.stdout, process.stdout), copy(child.stderr, process.stderr)]).then(() => undefined);
}

const hasExited = (child: ChildProcess): boolean => child.exitCode !== null || child.signalCode !== null;

/** True once `child` has exited, false if it still runs after `ms`. */
function exitsWithin(child: ChildProcess, ms: number): Promise<boolean> {
  if (hasExited(child)) return Promise.resolve(true);
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      child.removeListener('exit', onExit);
      resolve(false);
    }, ms);
    const onExit = (): void => {
      clearTimeout(timer);
      resolve(true);
    };
    child.once('exit', onExit);
  });
}

async function registerChild(session: Session, child: ChildProcess): Promise<string | null> {
  const agent = await session.agent();
  if (!agent || child.pid === undefined) return null;
  try {
    return await agent.registerActivity(child.pid, 'env');
  } catch (err) {
    // A child that has already exited cannot be registered; that is not worth a
    // warning. The agent sees it as a zombie before Node has reaped it (exitCode
    // still null), so on NO_PROCESS wait briefly for the exit to arrive; a child
    // still running after that is a real problem (an agent that cannot see it).
    const exited = hasExited(child) || (errorCode(err) === 'AGENT_NO_PROCESS' && (await exitsWithin(child, 1000)));
    if (!exited) warn(`could not register the env activity: ${errorMessage(err)}`);
    return null;
  }
}

async function unregisterChild(pid: number, token: string): Promise<void> {
  try {
    const { connectAgent } = await import('../agent/autostart.js');
    const agent = await connectAgent({ autostart: false });
    try {
      await agent.unregisterActivity(pid, token);
    } finally {
      agent.close();
    }
  } catch (err) {
    // The agent forgets the activities of exited processes by itself.
    if (errorCode(err) !== 'AGENT_UNAVAILABLE' && process.env.STASH_DEBUG === '1')
      warn(`unregister env activity: ${errorMessage(err)}`);
  }
}
