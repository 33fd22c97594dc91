/** `stash_key_server bench-http-fetch`: fetches of preloaded, verified shares (round robin). */
import type { ServerConfig } from '../server-config.js';
import { runHttpBench } from './http-common.js';
import { AUTO_FETCH_SHARES } from './settings.js';
import type { BenchReport } from './report.js';

export function benchHttpFetch(config: ServerConfig): Promise<BenchReport> {
  const preload = config.preloadShares === 0 ? AUTO_FETCH_SHARES : config.preloadShares;
  return runHttpBench({ command: 'bench-http-fetch', mode: 'fetch', preload }, config);
}
