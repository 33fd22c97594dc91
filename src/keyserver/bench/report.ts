/**
 * What every benchmark command prints: a short text report, or with --json
 * one JSON object (stable field names, used by bench/ scripts and tests); and
 * the progress line, only when stderr is a terminal.
 */
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { LatencyHistogram, type HistogramData } from './histogram.js';

export interface Latency {
  p50: number;
  p90: number;
  p99: number;
  max: number;
}

export interface BenchReport {
  command: string;
  /** Operations timed (HTTP requests; flows for bench-http-flow; writes for bench-store). */
  requests: number;
  errors: number;
  seconds: number;
  requests_per_second: number;
  /** Milliseconds. */
  latency_ms: Latency;
  /** Highest RSS sampled (every 20 ms) while the timed operations ran. */
  server_peak_rss_bytes: number;
  /** The process's peak RSS over the whole run, preloading included. */
  process_peak_rss_bytes: number;
  store_bytes: number;
  live_shares: number;
  concurrency: number;
  encoding: 'binary' | 'json' | 'store';
  request_bytes: number;
  response_bytes: number;
  preload_shares: number;
  /** Command-specific figures (lookups, per-step latencies...). */
  extra: Record<string, number | string>;
  first_error?: string;
}

export function latencyOf(h: LatencyHistogram | HistogramData): Latency {
  const hist = h instanceof LatencyHistogram ? h : LatencyHistogram.fromData(h);
  const ms = (us: number) => Math.round(us) / 1000;
  return {
    p50: ms(hist.percentile(50)),
    p90: ms(hist.percentile(90)),
    p99: ms(hist.percentile(99)),
    max: ms(hist.max),
  };
}

/** The server process's peak resident set size in bytes, since it started. */
export function peakRssBytes(): number {
  return process.resourceUsage().maxRSS * 1024;
}

/**
 * A full garbage collection before the timed phase, so the garbage of
 * preloading is not counted as the server's memory under load. (V8 exposes
 * gc() only behind a flag; a fresh context created after setting it has it.)
 */
export function collectGarbage(): void {
  setFlagsFromString('--expose-gc');
  const gc = runInNewContext('gc') as (() => void) | undefined;
  gc?.();
}

/**
 * Samples this process's RSS every 20 ms from start() to stop(), so the
 * figure reflects the timed phase and not the preloading before it.
 */
export class RssSampler {
  private peak = 0;
  private timer: NodeJS.Timeout | undefined;

  start(): void {
    this.sample();
    this.timer = setInterval(() => this.sample(), 20);
  }

  private sample(): void {
    this.peak = Math.max(this.peak, process.memoryUsage.rss());
  }

  /** Stops sampling; returns the peak in bytes. */
  stop(): number {
    if (this.timer) clearInterval(this.timer);
    this.sample();
    return this.peak;
  }
}

const mb = (bytes: number) => `${(bytes / 1048576).toFixed(1)} MB`;
const num = (n: number) => Math.round(n).toLocaleString('en-US');

export function formatReport(r: BenchReport): string {
  const lines = [
    `${r.command}: ${num(r.requests)} ${r.command === 'bench-http-flow' ? 'flows' : r.command === 'bench-store' ? 'durable writes' : 'requests'}, ${num(r.errors)} errors in ${r.seconds.toFixed(2)} s`,
    `  throughput   ${num(r.requests_per_second)} /s`,
    `  latency      p50 ${r.latency_ms.p50} ms, p90 ${r.latency_ms.p90} ms, p99 ${r.latency_ms.p99} ms, max ${r.latency_ms.max} ms`,
    `  server       peak RSS ${mb(r.server_peak_rss_bytes)} under load (${mb(r.process_peak_rss_bytes)} with preloading), store ${mb(r.store_bytes)} on disk, ${num(r.live_shares)} shares`,
    `  setup        concurrency ${r.concurrency}, ${r.encoding} bodies (${r.request_bytes} B request, ${r.response_bytes} B answer), ${num(r.preload_shares)} preloaded shares`,
  ];
  for (const [k, v] of Object.entries(r.extra))
    lines.push(`  ${k.padEnd(12)} ${typeof v === 'number' ? (Number.isInteger(v) ? num(v) : v) : v}`);
  if (r.first_error) lines.push(`  first error  ${r.first_error}`);
  return `${lines.join('\n')}\n`;
}

export function printReport(r: BenchReport, json: boolean, out: NodeJS.WritableStream = process.stdout): void {
  out.write(json ? `${JSON.stringify(r)}\n` : formatReport(r));
}

/** A progress writer for `total` operations; a no-op unless stderr is a terminal. */
export function progressLine(
  label: string,
  total: number,
  err: NodeJS.WriteStream = process.stderr,
): { update(done: number): void; end(): void } | undefined {
  if (!err.isTTY) return undefined;
  let shown = false;
  return {
    update(done) {
      shown = true;
      err.write(`\r${label}: ${num(done)}/${num(total)} (${Math.floor((done / total) * 100)}%)   `);
    },
    end() {
      if (shown) err.write('\r\x1b[K');
    },
  };
}
