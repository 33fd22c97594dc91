/**
 * `stash_key_server bench-http-flow`: the whole flow per operation: publish,
 * confirm the mailed link (POST /verify/<token>), fetch the share. One
 * "request" of the report is one flow of three HTTP requests.
 */
import type { ServerConfig } from '../server-config.js';
import { runHttpBench } from './http-common.js';
import type { BenchReport } from './report.js';

export function benchHttpFlow(config: ServerConfig): Promise<BenchReport> {
  return runHttpBench({ command: 'bench-http-flow', mode: 'flow', preload: config.preloadShares }, config);
}
