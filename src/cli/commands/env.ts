/**
 * `stash env CONTAINER -- CMD ARGS...`: runs CMD with the container's entries
 * added to its environment. While CMD runs, an `env` activity is registered
 * for the child's pid (the agent accepts a descendant of the caller), so the
 * machine is kept awake for it and it is terminated on suspend when so
 * configured. SIGINT, SIGTERM and SIGHUP are passed on to the child; the exit
 * status is the child's, or 128+N when signal N killed it.
 *
 * The values must become JS strings to be passed to the child (Node has no
 * other way to build an environment); they are dropped right after the spawn.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { constants } from 'node:os';
import { StashError, errorCode, errorMessage } from '../../errors.js';
import { validateContainerName, wipeEntries } from '../../vault/index.js';
import { readEntriesOf } from '../container-access.js';
import { warn } from '../output.js';
import type { Invocation } from '../registry.js';
import { Session } from '../session.js';

const FORWARDED = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;

/**
 * The child's environment: ours plus every entry. An entry holding a NUL byte
 * cannot be an environment variable (C strings end there); it is left out
 * with a warning that names it, rather than refusing the whole container.
 */
function buildEnv(container: string, entries: ReadonlyMap<string, Uint8Array>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const [name, value] of entries) {
    if (value.includes(0)) {
      warn(`entry ${name} holds a NUL byte, which an environment variable cannot carry; it was left out `
        + `(read it with \`stash get ${container} ${name}\`, or remove it with \`stash rm ${container} ${name}\`)`);
      continue;
    }
    env[name] = Buffer.from(value.buffer, value.byteOffset, value.length).toString('utf8');
  }
  return env;
}

function spawnChild(cmd: string, args: string[], env: NodeJS.ProcessEnv): Promise<ChildProcess> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { stdio: 'inherit', env });
    child.once('spawn', () => resolve(child));
    child.once('error', (err: NodeJS.ErrnoException) => {
      if (err.code === 'ENOENT') reject(new StashError('COMMAND_NOT_FOUND', `${cmd}: command not found`));
      else if (err.code === 'EACCES') reject(new StashError('COMMAND_NOT_EXECUTABLE', `${cmd}: permission denied`));
      else reject(new StashError('COMMAND_FAILED', `cannot run ${cmd}: ${err.message}`));
    });
  });
}

export async function run(inv: Invocation): Promise<number> {
  const name = inv.positionals[0]!;
  validateContainerName(name);
  const [cmd, ...args] = inv.rest as [string, ...string[]];
  const session = new Session(inv.values);
  try {
    let env: NodeJS.ProcessEnv | null = await session.withContentKey(name, async (key, info) => {
      const entries = await readEntriesOf(session.dir, info, key);
      try {
        return buildEnv(name, entries);
      } finally {
        wipeEntries(entries);
      }
    });
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
      spawned = await spawnChild(cmd, args, env);
    } catch (err) {
      for (const sig of FORWARDED) process.removeListener(sig, relay);
      throw err;
    }
    child = spawned;
    env = null;
    for (const sig of pending) spawned.kill(sig);
    const exit = once(spawned, 'exit') as Promise<[number | null, NodeJS.Signals | null]>;
    const token = await registerChild(session, spawned);
    // The connection is not kept open for the child's lifetime (the agent
    // drops idle connections); unregistering uses a fresh one.
    session.close();
    const [code, signal] = await exit;
    for (const sig of FORWARDED) process.removeListener(sig, relay);
    if (token !== null) await unregisterChild(spawned.pid!, token);
    if (signal !== null) return 128 + (constants.signals[signal] ?? 0);
    return code ?? 1;
  } finally {
    session.close();
  }
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
    const { connectAgent } = await import('../../agent/autostart.js');
    const agent = await connectAgent({ autostart: false });
    try {
      await agent.unregisterActivity(pid, token);
    } finally {
      agent.close();
    }
  } catch (err) {
    // The agent forgets the activities of exited processes by itself.
    if (errorCode(err) !== 'AGENT_UNAVAILABLE' && process.env.STASH_DEBUG === '1') warn(`unregister env activity: ${errorMessage(err)}`);
  }
}
