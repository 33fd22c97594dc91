/**
 * The automatic values of the benchmark options (documented in
 * docs/benchmarks.md) and how a benchmark reads its configuration.
 */
import { defaultConfig } from '../cli/options.js';
import type { ServerConfig } from '../server-config.js';

/** --concurrency 0: this many operations in flight (enough to keep group commit busy, few enough for one client core). */
export const AUTO_CONCURRENCY = 64;
/** bench-http-fetch with --preload-shares 0 fetches this many shares. */
export const AUTO_FETCH_SHARES = 1000;

export function concurrencyOf(config: ServerConfig): number {
  return config.concurrency === 0 ? AUTO_CONCURRENCY : config.concurrency;
}

/** Whether --state-dir (or state_dir) named a folder; otherwise a benchmark uses a temporary one. */
export function stateDirGiven(config: ServerConfig): boolean {
  return config.stateDir !== defaultConfig().stateDir;
}
