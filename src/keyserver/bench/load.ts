/**
 * The load loop of the benchmarks: `concurrency` workers in one event loop
 * each run one operation at a time until `total` operations are done (a
 * closed loop, like autocannon), timing every operation; plus a keep-alive
 * HTTP client with one socket per worker.
 */
import { Agent, request } from 'node:http';
import { performance } from 'node:perf_hooks';
import { LatencyHistogram } from './histogram.js';

export interface LoadOptions {
  total: number;
  concurrency: number;
  /** Runs operation `i`; resolves true on success. A throw counts as an error. */
  run(i: number): Promise<boolean>;
  /** Called at the start and about every 250 ms with the operations done so far. */
  onProgress?(done: number): void;
}

export interface LoadResult {
  requests: number;
  errors: number;
  seconds: number;
  histogram: LatencyHistogram;
  /** The first failure, for the report (never a secret: statuses and error codes only). */
  firstError: string | undefined;
}

/** Runs the closed loop and returns counts, wall time and the latency histogram. */
export async function runLoad(opts: LoadOptions): Promise<LoadResult> {
  const histogram = new LatencyHistogram();
  let next = 0;
  let done = 0;
  let errors = 0;
  let firstError: string | undefined;
  opts.onProgress?.(0);
  const timer = opts.onProgress ? setInterval(() => opts.onProgress!(done), 250) : undefined;
  const started = performance.now();
  const worker = async (): Promise<void> => {
    for (let i = next++; i < opts.total; i = next++) {
      const t0 = performance.now();
      let ok: boolean;
      try {
        ok = await opts.run(i);
      } catch (err) {
        ok = false;
        firstError ??= err instanceof Error ? ((err as NodeJS.ErrnoException).code ?? err.message) : String(err);
      }
      histogram.record((performance.now() - t0) * 1000);
      if (!ok) {
        errors++;
        firstError ??= `operation ${i} failed`;
      }
      done++;
    }
  };
  try {
    await Promise.all(Array.from({ length: Math.max(1, Math.min(opts.concurrency, opts.total)) }, worker));
  } finally {
    if (timer) clearInterval(timer);
  }
  return { requests: done, errors, seconds: (performance.now() - started) / 1000, histogram, firstError };
}

export interface HttpAnswer {
  status: number;
  body: Buffer;
}

/** A keep-alive HTTP/1.1 client for one origin. */
export class KeepAliveClient {
  private readonly agent: Agent;
  private readonly host: string;
  private readonly port: number;

  constructor(baseUrl: string, sockets: number) {
    const u = new URL(baseUrl);
    this.host = u.hostname;
    this.port = Number(u.port);
    this.agent = new Agent({ keepAlive: true, maxSockets: sockets, maxFreeSockets: sockets });
  }

  send(method: string, path: string, headers: Record<string, string>, body: Buffer | undefined): Promise<HttpAnswer> {
    return new Promise((resolve, reject) => {
      const all = body ? { ...headers, 'Content-Length': String(body.length) } : headers;
      const req = request(
        { host: this.host, port: this.port, method, path, headers: all, agent: this.agent },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () =>
            resolve({ status: res.statusCode ?? 0, body: chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks) }),
          );
          res.on('error', reject);
        },
      );
      req.on('error', reject);
      req.end(body);
    });
  }

  close(): void {
    this.agent.destroy();
  }
}
