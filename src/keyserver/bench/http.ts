/** `stash_key_server bench-http`: publishes (durable writes through HTTP, verification links kept in memory). */
import type { ServerConfig } from '../server-config.js';
import { runHttpBench } from './http-common.js';
import type { BenchReport } from './report.js';

export function benchHttp(config: ServerConfig): Promise<BenchReport> {
  return runHttpBench({ command: 'bench-http', mode: 'publish', preload: config.preloadShares }, config);
}
