/**
 * stash's config file (TOML) and the environment overrides, resolved into
 * settings that remember where each value came from (for `stash doctor`).
 *
 * File: STASH_AGENT_CONFIG, else STASH_CONFIG, else the platform default.
 * Keys: [agent] prevent_sleep (alias suspend_inhibit), terminate_on_suspend;
 * top-level key_server_url. Unknown keys and wrong types are errors naming the
 * file, the key and what was expected.
 */
import { readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { ConfigError, errorMessage } from '../errors.js';

export type SettingSource = 'default' | 'file' | 'environment';

export interface Setting<T> {
  value: T;
  source: SettingSource;
  /** The file key or environment variable that set it. */
  from: string | null;
}

export interface StashConfig {
  path: string;
  pathSource: 'STASH_AGENT_CONFIG' | 'STASH_CONFIG' | 'default';
  fileFound: boolean;
  preventSleep: Setting<boolean>;
  terminateOnSuspend: Setting<boolean>;
  keyServerUrl: Setting<string | null>;
}

/** The config file path and which rule chose it. */
export function configPath(env: NodeJS.ProcessEnv = process.env, platform: NodeJS.Platform = process.platform): { path: string; source: StashConfig['pathSource'] } {
  if (env.STASH_AGENT_CONFIG) return { path: env.STASH_AGENT_CONFIG, source: 'STASH_AGENT_CONFIG' };
  if (env.STASH_CONFIG) return { path: env.STASH_CONFIG, source: 'STASH_CONFIG' };
  const home = env.HOME || homedir();
  if (platform === 'darwin') return { path: join(home, 'Library', 'Application Support', 'stash', 'config.toml'), source: 'default' };
  if (platform === 'win32') {
    const base = env.APPDATA || env.LOCALAPPDATA || join(home, 'AppData', 'Roaming');
    return { path: join(base, 'stash', 'config.toml'), source: 'default' };
  }
  return { path: join(env.XDG_CONFIG_HOME || join(home, '.config'), 'stash', 'config.toml'), source: 'default' };
}

const AGENT_KEYS = ['prevent_sleep', 'suspend_inhibit', 'terminate_on_suspend'] as const;
const TOP_KEYS = ['agent', 'key_server_url'] as const;

/** Parses a boolean environment value; anything else is an error naming the variable. */
export function envBoolean(name: string, raw: string): boolean {
  const v = raw.trim().toLowerCase();
  if (['1', 'true', 'yes', 'on'].includes(v)) return true;
  if (['0', 'false', 'no', 'off'].includes(v)) return false;
  throw new ConfigError(`${name} must be true or false (also 1/0, yes/no, on/off), got ${JSON.stringify(raw)}`);
}

async function parseToml(path: string, text: string): Promise<Record<string, unknown>> {
  const { parse } = await import('smol-toml');
  try {
    return parse(text) as Record<string, unknown>;
  } catch (err) {
    throw new ConfigError(`${path}: not valid TOML: ${errorMessage(err).split('\n')[0]}`);
  }
}

function fileBoolean(path: string, key: string, value: unknown): boolean {
  if (typeof value !== 'boolean') throw new ConfigError(`${path}: ${key} must be a boolean (true or false), got ${JSON.stringify(value)}`);
  return value;
}

/** Loads the config file (if any) and applies environment overrides. */
export async function loadConfig(env: NodeJS.ProcessEnv = process.env): Promise<StashConfig> {
  const { path, source } = configPath(env);
  let text: string | null = null;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    // A missing default file is normal; a missing file someone named explicitly is an error.
    if (code !== 'ENOENT' || source !== 'default') throw new ConfigError(`cannot read config file ${path} (from ${source}): ${errorMessage(err)}`);
  }
  const def = <T>(value: T): Setting<T> => ({ value, source: 'default', from: null });
  const config: StashConfig = {
    path,
    pathSource: source,
    fileFound: text !== null,
    preventSleep: def(true),
    terminateOnSuspend: def(true),
    keyServerUrl: def<string | null>(null),
  };
  if (text !== null) {
    const doc = await parseToml(path, text);
    for (const key of Object.keys(doc)) {
      if (!(TOP_KEYS as readonly string[]).includes(key)) throw new ConfigError(`${path}: unknown key ${JSON.stringify(key)}; known keys: ${TOP_KEYS.join(', ')}`);
    }
    if (doc.key_server_url !== undefined) {
      const url = doc.key_server_url;
      if (typeof url !== 'string' || !/^https?:\/\//.test(url) || !URL.canParse(url)) {
        throw new ConfigError(`${path}: key_server_url must be an http(s) URL string, got ${JSON.stringify(url)}`);
      }
      config.keyServerUrl = { value: url, source: 'file', from: 'key_server_url' };
    }
    const agent = doc.agent;
    if (agent !== undefined) {
      if (typeof agent !== 'object' || agent === null || Array.isArray(agent)) throw new ConfigError(`${path}: agent must be a table ([agent])`);
      const table = agent as Record<string, unknown>;
      for (const key of Object.keys(table)) {
        if (!(AGENT_KEYS as readonly string[]).includes(key)) throw new ConfigError(`${path}: unknown key "agent.${key}"; known keys: ${AGENT_KEYS.map((k) => `agent.${k}`).join(', ')}`);
      }
      const prevent = table.prevent_sleep;
      const alias = table.suspend_inhibit;
      if (prevent !== undefined && alias !== undefined && prevent !== alias) {
        throw new ConfigError(`${path}: agent.prevent_sleep and its alias agent.suspend_inhibit disagree; keep one`);
      }
      if (prevent !== undefined) config.preventSleep = { value: fileBoolean(path, 'agent.prevent_sleep', prevent), source: 'file', from: 'agent.prevent_sleep' };
      else if (alias !== undefined) config.preventSleep = { value: fileBoolean(path, 'agent.suspend_inhibit', alias), source: 'file', from: 'agent.suspend_inhibit' };
      if (table.terminate_on_suspend !== undefined) {
        config.terminateOnSuspend = { value: fileBoolean(path, 'agent.terminate_on_suspend', table.terminate_on_suspend), source: 'file', from: 'agent.terminate_on_suspend' };
      }
    }
  }
  if (env.STASH_AGENT_PREVENT_SLEEP !== undefined && env.STASH_AGENT_PREVENT_SLEEP !== '') {
    config.preventSleep = { value: envBoolean('STASH_AGENT_PREVENT_SLEEP', env.STASH_AGENT_PREVENT_SLEEP), source: 'environment', from: 'STASH_AGENT_PREVENT_SLEEP' };
  }
  if (env.STASH_AGENT_TERMINATE_ON_SUSPEND !== undefined && env.STASH_AGENT_TERMINATE_ON_SUSPEND !== '') {
    config.terminateOnSuspend = { value: envBoolean('STASH_AGENT_TERMINATE_ON_SUSPEND', env.STASH_AGENT_TERMINATE_ON_SUSPEND), source: 'environment', from: 'STASH_AGENT_TERMINATE_ON_SUSPEND' };
  }
  if (env.STASH_KEY_SERVER_URL) {
    const url = env.STASH_KEY_SERVER_URL;
    if (!/^https?:\/\//.test(url) || !URL.canParse(url)) throw new ConfigError(`STASH_KEY_SERVER_URL must be an http(s) URL, got ${JSON.stringify(url)}`);
    config.keyServerUrl = { value: url, source: 'environment', from: 'STASH_KEY_SERVER_URL' };
  }
  return config;
}
