/**
 * The agent's own settings: those it reads from the environment only (its
 * idle times), beside the application's config file and overrides
 * (src/config/app-config.ts). agentSettings() checks them all the way the agent
 * does: the CLI runs it before it starts an agent, so a bad value is reported
 * at once by the command the user typed.
 */
import { ConfigError } from '../errors.js';
import { type LoadOptions, loadConfig, type StashConfig } from '../config/app-config.js';

/** A positive number of seconds from `env[name]` in ms, else `defaultMs`. */
function secondsFromEnv(env: NodeJS.ProcessEnv, name: string, defaultMs: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return defaultMs;
  const n = Number(raw);
  if (!Number.isFinite(n) || n <= 0)
    throw new ConfigError(`${name} must be a positive number of seconds, got ${JSON.stringify(raw.slice(0, 100))}`);
  return n * 1000;
}

/** The agent's idle time before it exits: 10 minutes, or STASH_AGENT_IDLE_SECONDS (tests). */
export function idleMs(env: NodeJS.ProcessEnv = process.env): number {
  return secondsFromEnv(env, 'STASH_AGENT_IDLE_SECONDS', 600_000);
}

/**
 * A connection with no traffic for this long is closed: 5 minutes, or
 * STASH_AGENT_CONNECTION_IDLE_SECONDS (tests). Clients reconnect on their next
 * request (client.ts), so a command that waits longer (a password prompt, a
 * long `stash env` child) loses nothing.
 */
export function connectionIdleMs(env: NodeJS.ProcessEnv = process.env): number {
  return secondsFromEnv(env, 'STASH_AGENT_CONNECTION_IDLE_SECONDS', 300_000);
}

export interface AgentSettings {
  config: StashConfig;
  idleMs: number;
  connectionIdleMs: number;
}

/**
 * Everything the agent reads from its config file and environment, checked
 * the way the agent checks it: a ConfigError here is exactly what would stop
 * an agent from starting.
 */
export async function agentSettings(
  env: NodeJS.ProcessEnv = process.env,
  opts: LoadOptions = {},
): Promise<AgentSettings> {
  const config = await loadConfig(env, opts);
  return { config, idleMs: idleMs(env), connectionIdleMs: connectionIdleMs(env) };
}
