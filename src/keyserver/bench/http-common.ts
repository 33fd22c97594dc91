/**
 * The shared run of the HTTP benchmarks: start the server under test,
 * preload shares, fork the load generator, stop the server, build the report.
 */
import { UsageError } from '../../errors.js';
import type { ServerConfig } from '../server-config.js';
import { preloadShares, startBenchServer } from './bench-server.js';
import { loadClientFromEnv, loadCpuFromEnv, runLoadProcess, type LoadMode, type LoadSummary } from './load-driver.js';
import { RssSampler, collectGarbage, latencyOf, peakRssBytes, progressLine, type BenchReport } from './report.js';
import { MAX_BODY_BYTES, benchPublicKey, encodingFor } from './requests.js';
import { concurrencyOf, stateDirGiven } from './settings.js';

const KEY_POOL = 16;

export function checkPayload(command: string, config: ServerConfig): void {
  if (config.payloadBytes > MAX_BODY_BYTES) {
    throw new UsageError(
      `${command}: --payload-bytes ${config.payloadBytes} is above the server's request body limit (${MAX_BODY_BYTES} bytes)`,
    );
  }
}

export interface HttpBenchSpec {
  command: string;
  mode: Exclude<LoadMode, 'raw'>;
  /** Shares to create before timing. */
  preload: number;
}

/** Runs one HTTP benchmark end to end. */
export async function runHttpBench(spec: HttpBenchSpec, config: ServerConfig): Promise<BenchReport> {
  checkPayload(spec.command, config);
  const concurrency = concurrencyOf(config);
  const server = await startBenchServer(config, stateDirGiven(config), spec.mode === 'flow');
  let summary: LoadSummary;
  let liveShares: number;
  const rss = new RssSampler();
  let underLoadRss = 0;
  /** The server process's CPU time (every thread: the event loop, libuv's pool) while the operations ran. */
  let cpuMicros = 0;
  try {
    const keys = Array.from({ length: KEY_POOL }, benchPublicKey);
    const codes =
      spec.preload > 0 ? await preloadShares(server.running.store, server.running.config, spec.preload, keys) : [];
    const progress = progressLine(spec.command, config.requests);
    collectGarbage();
    rss.start();
    const cpuBefore = process.cpuUsage();
    try {
      summary = await runLoadProcess(
        {
          mode: spec.mode,
          url: server.url,
          total: config.requests,
          concurrency,
          payloadBytes: config.payloadBytes,
          keys: keys.map((k) => k.toString('base64')),
          codes: spec.mode === 'fetch' ? codes : [],
          progress: progress !== undefined,
          cpu: loadCpuFromEnv(),
          client: loadClientFromEnv(),
        },
        {
          links: (deliver) => server.feedLinks(deliver),
          ...(progress ? { onProgress: (d: number) => progress.update(d) } : {}),
        },
      );
    } finally {
      const cpu = process.cpuUsage(cpuBefore);
      cpuMicros = cpu.user + cpu.system;
      underLoadRss = rss.stop();
      progress?.end();
    }
    liveShares = server.running.store.stats().sharesLive;
  } catch (err) {
    await server.close();
    throw err;
  }
  const { storeBytes } = await server.close();
  // Steadier than throughput on a shared machine: a change's effect shows here first (docs/benchmarks.md).
  const extra: Record<string, number | string> = {
    server_cpu_us_per_op: summary.requests > 0 ? Math.round((cpuMicros / summary.requests) * 10) / 10 : 0,
    // Below 1 the load generator waited for the server: it was not what limited the rate.
    load_cpu_share: summary.seconds > 0 ? Math.round((summary.cpuMicros / (summary.seconds * 1e6)) * 100) / 100 : 0,
  };
  for (const [step, h] of Object.entries(summary.steps)) {
    const l = latencyOf(h);
    extra[`${step}_p50_ms`] = l.p50;
    extra[`${step}_p99_ms`] = l.p99;
  }
  return {
    command: spec.command,
    requests: summary.requests,
    errors: summary.errors,
    seconds: summary.seconds,
    requests_per_second: summary.seconds > 0 ? summary.requests / summary.seconds : 0,
    latency_ms: latencyOf(summary.histogram),
    server_peak_rss_bytes: underLoadRss,
    process_peak_rss_bytes: peakRssBytes(),
    store_bytes: storeBytes,
    live_shares: liveShares,
    concurrency,
    encoding: encodingFor(config.payloadBytes),
    request_bytes: summary.requestBytes,
    response_bytes: summary.responseBytes,
    preload_shares: spec.preload,
    extra,
    ...(summary.firstError !== undefined ? { first_error: summary.firstError } : {}),
  };
}
