/**
 * Entry of the bench-* commands (loaded lazily by main.ts): runs one
 * benchmark, prints its report, and fails (exit 1) when any operation failed;
 * SIGINT or SIGTERM ends the run with status 130 or 143.
 */
import type { Command } from '../cli/options.js';
import type { ServerConfig } from '../server-config.js';
import { UsageError } from '../../errors.js';
import { benchHttp } from './http.js';
import { benchHttpFetch } from './http-fetch.js';
import { benchHttpFlow } from './http-flow.js';
import { printReport, type BenchReport } from './report.js';
import { benchStore } from './store.js';

const commands: Partial<Record<Command, (c: ServerConfig) => Promise<BenchReport>>> = {
  'bench-store': benchStore,
  'bench-http': benchHttp,
  'bench-http-fetch': benchHttpFetch,
  'bench-http-flow': benchHttpFlow,
};

export async function runBench(command: Command, config: ServerConfig): Promise<void> {
  const bench = commands[command];
  if (!bench) throw new UsageError(`${command} is not a benchmark`);
  // An interrupted run still removes its temporary state folder ('exit' handlers run).
  process.once('SIGINT', () => process.exit(130));
  process.once('SIGTERM', () => process.exit(143));
  const report = await bench(config);
  printReport(report, config.json);
  if (report.errors > 0) {
    process.stderr.write(
      `stash_key_server: ${command}: ${report.errors} of ${report.requests} operations failed${report.first_error ? ` (first: ${report.first_error})` : ''}\n`,
    );
    process.exitCode = 1;
  }
}
