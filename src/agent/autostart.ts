/**
 * Connecting with autostart: when no agent answers, start this package's
 * `stash __agent` (detached, no inherited stdio) and wait for its endpoint
 * with backoff. Concurrent first commands may each start one; the agents
 * settle on exactly one owner (listener.ts) and the losers exit at once.
 */
import { join } from 'node:path';
import { packageRoot } from '../native/binding.js';
import { AgentClient, AgentError } from './client.js';
import { AgentPathError, agentEndpoint, checkAgentDir, ensureAgentDir, type Endpoint } from './paths.js';

const NOT_RUNNING = new Set(['ENOENT', 'ECONNREFUSED', 'ENOTSOCK']);

/** The command that starts an agent: this package's bin/stash.js with __agent. */
export function agentCommand(): { command: string; args: string[] } {
  return { command: process.execPath, args: [join(packageRoot, 'bin', 'stash.js'), '__agent'] };
}

async function startAgent(): Promise<void> {
  // Loaded here, not at the top: a command that finds the agent running (`stash get`) spawns nothing.
  const { spawn } = await import('node:child_process');
  const { command, args } = agentCommand();
  const child = spawn(command, args, { detached: true, stdio: 'ignore', env: process.env, windowsHide: true });
  child.on('error', () => {
    /* reported below as "did not come up" */
  });
  child.unref();
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/**
 * Connects to the agent, starting one if none answers and `autostart` is set.
 * Throws AgentError AGENT_UNAVAILABLE with the reason otherwise.
 */
export async function connectAgent(opts: { autostart?: boolean; endpoint?: Endpoint; waitMs?: number } = {}): Promise<AgentClient> {
  const endpoint = opts.endpoint ?? agentEndpoint();
  if (endpoint.dir) {
    // Only a command that may start an agent creates the socket folder; the
    // others inspect it (an unsafe folder is refused either way).
    if (opts.autostart) ensureAgentDir(endpoint.dir);
    else {
      const check = checkAgentDir(endpoint.dir);
      if (!check.ok) throw new AgentPathError(`unsafe agent socket folder: ${check.problem}. Check its contents, then fix it with: chmod 700 ${endpoint.dir}`);
    }
  }
  try {
    return await AgentClient.connect(endpoint);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? '';
    if (!NOT_RUNNING.has(code) || !opts.autostart) {
      throw new AgentError('AGENT_UNAVAILABLE', `no agent answers at ${endpoint.path} (${code || (err as Error).message})`);
    }
  }
  await startAgent();
  const deadline = Date.now() + (opts.waitMs ?? 5000);
  let delay = 10;
  let last = '';
  while (Date.now() < deadline) {
    await sleep(delay);
    delay = Math.min(delay * 2, 200);
    try {
      return await AgentClient.connect(endpoint);
    } catch (err) {
      last = (err as NodeJS.ErrnoException).code ?? (err as Error).message;
    }
  }
  throw new AgentError('AGENT_UNAVAILABLE', `started an agent but it did not answer at ${endpoint.path} within ${opts.waitMs ?? 5000} ms (${last}); see its log (STASH_SESSION_AGENT_LOG, syslog, or ~/.local/state/stash/agent.log)`);
}
