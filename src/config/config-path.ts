/**
 * Where the config file is, and whether any setting may be set at all: the small part of the
 * app config a read needs (src/cli/session.ts). `stash get` checks the settings as every other
 * command does (a bad value is exit 78 for reads and writes alike), but parses them only when
 * something is there to parse: with no config file and no setting variable, nothing can be
 * wrong, and the TOML parser and the rules stay unloaded.
 */
import { existsSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';

/** Which rule chose the config file. */
export type ConfigPathSource = 'STASH_AGENT_CONFIG' | 'STASH_CONFIG' | 'default';

/** Every environment variable that sets or changes a setting (app-config.ts, agent/config.ts). */
export const SETTING_VARIABLES = [
  'STASH_AGENT_CONFIG',
  'STASH_CONFIG',
  'STASH_AGENT_PREVENT_SLEEP',
  'STASH_AGENT_TERMINATE_ON_SUSPEND',
  'STASH_AGENT_LOCK_ON_SCREEN_LOCK',
  'STASH_AGENT_IDLE_SECONDS',
  'STASH_AGENT_CONNECTION_IDLE_SECONDS',
  'STASH_CLIP_SECONDS',
  'STASH_HISTORY_KEEP',
  'STASH_KEY_SERVER_URL',
  'STASH_CONTAINER',
] as const;

/** The config file path and which rule chose it. */
export function configPath(
  env: NodeJS.ProcessEnv = process.env,
  platform: NodeJS.Platform = process.platform,
): { path: string; source: ConfigPathSource } {
  if (env.STASH_AGENT_CONFIG) return { path: env.STASH_AGENT_CONFIG, source: 'STASH_AGENT_CONFIG' };
  if (env.STASH_CONFIG) return { path: env.STASH_CONFIG, source: 'STASH_CONFIG' };
  const home = env.HOME || homedir();
  if (platform === 'darwin')
    return { path: join(home, 'Library', 'Application Support', 'stash', 'config.toml'), source: 'default' };
  if (platform === 'win32') {
    const base = env.APPDATA || env.LOCALAPPDATA || join(home, 'AppData', 'Roaming');
    return { path: join(base, 'stash', 'config.toml'), source: 'default' };
  }
  return { path: join(env.XDG_CONFIG_HOME || join(home, '.config'), 'stash', 'config.toml'), source: 'default' };
}

/** True when a config file exists or a setting variable is set: only then can a setting be wrong. */
export function settingsMayBeSet(env: NodeJS.ProcessEnv = process.env): boolean {
  if (SETTING_VARIABLES.some((name) => env[name] !== undefined && env[name] !== '')) return true;
  return existsSync(configPath(env).path);
}
