/**
 * The user's cache folder for stash (key server topologies, compiled code).
 * Kept apart from the modules that use it: the launcher reads it before
 * anything else of the CLI is loaded (launch.ts).
 */
import { homedir } from 'node:os';
import { join } from 'node:path';

/** The folder of the cache: XDG_CACHE_HOME/stash and its platform equivalents. */
export function cacheDir(env: NodeJS.ProcessEnv = process.env, platform: NodeJS.Platform = process.platform): string {
  const home = env.HOME || homedir();
  if (platform === 'darwin') return join(home, 'Library', 'Caches', 'stash');
  if (platform === 'win32') return join(env.LOCALAPPDATA || join(home, 'AppData', 'Local'), 'stash', 'cache');
  const xdg = env.XDG_CACHE_HOME?.startsWith('/') ? env.XDG_CACHE_HOME : join(home, '.cache');
  return join(xdg, 'stash');
}
