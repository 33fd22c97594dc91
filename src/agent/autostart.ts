/**
 * Connecting with autostart: when no agent answers, start this package's
 * `stash __agent` (detached, no inherited stdio) and wait for its endpoint
 * with backoff. Concurrent first commands wait for each other on a lock
 * (autostart-lock.ts); should two start one all the same, the agents settle
 * on exactly one owner (listener.ts) and the losers exit at once.
 */
import { join } from 'node:path';
import { ConfigError } from '../errors.js';
import { packageRoot } from '../native/binding.js';
import { AgentClient, AgentError, type ConnectOptions } from './client.js';
import { transportChoice } from './transport.js';
import { autostartLockDir, takeAutostartLock } from './autostart-lock.js';
import { findAgent } from './discover.js';
import { agentCandidates, checkAgentDir, ensureAgentDir, unsafeAgentDirError, type Endpoint } from './paths.js';

const NOT_RUNNING = new Set(['ENOENT', 'ECONNREFUSED', 'ENOTSOCK']);

/** The command that starts an agent: this package's bin/stash.js with __agent. */
export function agentCommand(): { command: string; args: string[] } {
  return { command: process.execPath, args: [join(packageRoot, 'bin', 'stash.js'), '__agent'] };
}

/** What became of the agent we started, while we wait for its socket. */
interface Started {
  /** Its exit status once it exited (0: it lost the race to another agent, which will answer). */
  exitCode: number | null;
  signal: NodeJS.Signals | null;
  spawnError: string | null;
}

async function startAgent(): Promise<Started> {
  // Loaded here, not at the top: a command that finds the agent running (`stash get`) spawns nothing.
  const { spawn } = await import('node:child_process');
  const { command, args } = agentCommand();
  const started: Started = { exitCode: null, signal: null, spawnError: null };
  const child = spawn(command, args, { detached: true, stdio: 'ignore', env: process.env, windowsHide: true });
  child.on('error', (err) => {
    started.spawnError = err.message;
  });
  child.on('exit', (code, signal) => {
    started.exitCode = code;
    started.signal = signal;
  });
  child.unref();
  return started;
}

/** Where the agent logs, as a person should look for it (log.ts decides the same way). */
async function logHint(): Promise<string> {
  const { describeLogTarget } = await import('./log.js');
  return `see its log: ${describeLogTarget()}`;
}

/**
 * The settings a new agent would read, checked here first: an agent that
 * cannot start for a bad config value is reported at once, with the file and
 * line or the variable, by the command the user typed (ConfigError, exit 78),
 * instead of after a wait for a socket that never comes.
 */
async function checkSettings(): Promise<void> {
  const { agentSettings } = await import('./config.js');
  await agentSettings(process.env);
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Connects to `endpoint`; the errno code when nothing answers there. AgentError and ConfigError are thrown. */
async function tryConnect(endpoint: Endpoint, opts: ConnectOptions): Promise<AgentClient | string> {
  try {
    return await AgentClient.connect(endpoint, 2000, opts);
  } catch (err) {
    // The transport's own refusal (no addon for `blocking`, a configuration error) says what to do: keep it.
    if (err instanceof AgentError || err instanceof ConfigError) throw err;
    return (err as NodeJS.ErrnoException).code || (err as Error).message;
  }
}

/**
 * Connects to the agent, starting one if none answers and `autostart` is set.
 * Throws AgentError AGENT_UNAVAILABLE with the reason otherwise. The transport is
 * STASH_AGENT_TRANSPORT's (default auto: the addon's blocking socket calls where
 * there are, so a short command loads no node:net) unless `transport` names one.
 *
 * The environment's own endpoint comes first. When no agent answers there,
 * the user's other socket folders (agentCandidates: the uid's runtime folder,
 * the fallback) are tried, and an agent of this user found in one is used
 * (discover.ts), so a shell with another XDG_RUNTIME_DIR never starts a
 * second agent. A given `endpoint`, or STASH_SESSION_AGENT_DIR, means only there.
 */
export async function connectAgent(
  opts: { autostart?: boolean; endpoint?: Endpoint; waitMs?: number } & ConnectOptions = {},
): Promise<AgentClient> {
  const candidates = opts.endpoint ? [opts.endpoint] : agentCandidates();
  const endpoint = candidates[0]!;
  const connectOpts: ConnectOptions = {
    transport: opts.transport ?? transportChoice(process.env),
    replyTimeoutMs: opts.replyTimeoutMs,
  };
  if (endpoint.dir) {
    // An unsafe folder is refused before anything connects to it or creates in it.
    const check = checkAgentDir(endpoint.dir);
    if (!check.ok) throw unsafeAgentDirError(endpoint, check);
  }
  const first = await tryConnect(endpoint, connectOpts);
  if (typeof first !== 'string') return first;
  const elsewhere = await findAgent(candidates.slice(1), connectOpts);
  if (elsewhere) return elsewhere;
  if (!NOT_RUNNING.has(first) || !opts.autostart)
    throw new AgentError('AGENT_UNAVAILABLE', `no agent answers at ${endpoint.path} (${first})`);
  await checkSettings();
  // Only a command that may start an agent creates the socket folder.
  if (endpoint.dir) ensureAgentDir({ dir: endpoint.dir, source: endpoint.source });
  const waitMs = opts.waitMs ?? 5000;
  // A holder keeps the lock while its agent starts, at most its own waitMs and a connect: wait a little longer than that.
  const lock = await takeAutostartLock(autostartLockDir(candidates), Date.now() + waitMs + 5000);
  try {
    // Whoever held the lock may have started an agent meanwhile: look again before starting one.
    if (lock) {
      const again = await tryConnect(endpoint, connectOpts);
      if (typeof again !== 'string') return again;
      const other = await findAgent(candidates.slice(1), connectOpts);
      if (other) return other;
    }
    return await startAndConnect(endpoint, connectOpts, waitMs);
  } finally {
    lock?.release();
  }
}

/** Starts an agent and waits, with backoff, until it answers at `endpoint`. */
async function startAndConnect(endpoint: Endpoint, connectOpts: ConnectOptions, waitMs: number): Promise<AgentClient> {
  const started = await startAgent();
  const deadline = Date.now() + waitMs;
  let delay = 10;
  let last = '';
  while (Date.now() < deadline) {
    await sleep(delay);
    delay = Math.min(delay * 2, 200);
    try {
      return await AgentClient.connect(endpoint, 2000, connectOpts);
    } catch (err) {
      last = (err as NodeJS.ErrnoException).code ?? (err as Error).message;
    }
    // An agent that died at start will never answer: say so now, not after the whole wait.
    if (started.spawnError !== null)
      throw new AgentError('AGENT_UNAVAILABLE', `could not start the agent (${started.spawnError})`);
    if (started.signal !== null || (started.exitCode !== null && started.exitCode !== 0)) {
      const how =
        started.signal !== null ? `was killed by ${started.signal}` : `exited with status ${started.exitCode}`;
      throw new AgentError('AGENT_UNAVAILABLE', `the agent ${how} as it started; ${await logHint()}`);
    }
  }
  throw new AgentError(
    'AGENT_UNAVAILABLE',
    `started an agent but it did not answer at ${endpoint.path} within ${waitMs} ms (${last}); ${await logHint()}`,
  );
}
