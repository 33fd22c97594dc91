/**
 * Runs the HTTP load generator in a child process, so the server under test
 * keeps its own event loop (and its own peak RSS). With
 * STASH_BENCH_LOAD_CPU=N (and taskset installed) the child pins itself to CPU
 * N; bench/ scripts pin the server to another CPU.
 */
import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { HistogramData } from './histogram.js';

export type LoadMode = 'publish' | 'fetch' | 'flow' | 'raw' | 'confirm';

export interface LoadPlan {
  mode: LoadMode;
  url: string;
  total: number;
  concurrency: number;
  payloadBytes: number;
  /** Public keys (base64) to publish; publish and flow. */
  keys: string[];
  /** Display codes of live shares; fetch. */
  codes: string[];
  /** confirm: the verification link paths (/verify/<token>) to POST, one each, expecting HTTP 200. */
  paths?: string[];
  /** publish: send back the display code of every share created (LoadSummary.codes). */
  collectCodes?: boolean;
  /** raw: POST this body (base64) to `path` and expect HTTP 200. */
  raw?: { path: string; body: string; contentType: string };
  progress: boolean;
  cpu: number | undefined;
  /** `raw` (default): the lean client of raw-client.ts; `node-http`: node:http with a keep-alive Agent. */
  client?: LoadClient;
}

export type LoadClient = 'raw' | 'node-http';

/** STASH_BENCH_CLIENT=node-http measures with node:http instead of the lean client. */
export function loadClientFromEnv(env: NodeJS.ProcessEnv = process.env): LoadClient {
  return env.STASH_BENCH_CLIENT === 'node-http' ? 'node-http' : 'raw';
}

export interface LoadSummary {
  requests: number;
  errors: number;
  seconds: number;
  histogram: HistogramData;
  /** flow: the latency of each step. */
  steps: Record<string, HistogramData>;
  firstError: string | undefined;
  /** The load generator's own CPU time (user + system, microseconds) while it ran the operations. */
  cpuMicros: number;
  /** Size of the last successful answer body. */
  responseBytes: number;
  requestBytes: number;
  /** publish with collectCodes: the codes created, in no particular order. */
  codes?: string[];
}

export type ToParent =
  | { type: 'progress'; done: number }
  | { type: 'done'; summary: LoadSummary }
  | { type: 'failed'; message: string };

/** `links`: [email, verification link path] pairs as they were mailed, pushed in batches (flow). */
export type ToChild = { type: 'plan'; plan: LoadPlan } | { type: 'links'; links: Array<[string, string]> };

/** Hands `deliver` to whoever mails verification links, to push them to the load generator. */
export type LinkFeed = (deliver: (links: Array<[string, string]>) => void) => void;

export interface DriverHooks {
  /** The flow's verification links: pushed to the load generator, one message per batch of mails. */
  links?: LinkFeed;
  onProgress?(done: number): void;
}

/** The CPU the load generator should pin itself to (STASH_BENCH_LOAD_CPU), if any. */
export function loadCpuFromEnv(env: NodeJS.ProcessEnv = process.env): number | undefined {
  const raw = env.STASH_BENCH_LOAD_CPU;
  return raw !== undefined && /^\d{1,3}$/.test(raw) ? Number(raw) : undefined;
}

function childEntry(): { path: string; execArgv: string[] } {
  const self = fileURLToPath(import.meta.url);
  // Run from TypeScript sources (through tsx) the child needs the same loader.
  if (self.endsWith('.ts'))
    return { path: self.replace(/load-driver\.ts$/, 'load-process.ts'), execArgv: ['--import', 'tsx'] };
  return { path: self.replace(/load-driver\.js$/, 'load-process.js'), execArgv: [] };
}

/**
 * Forks the load generator, feeds it the plan and the links mailed meanwhile.
 * The links are pushed, a batch per message, instead of asked for one by one:
 * the server under test shares its CPU with this side of the channel, and a
 * round trip per flow cost it about 4 % of a flow (a CPU profile, 2026-11-27).
 */
export function runLoadProcess(plan: LoadPlan, hooks: DriverHooks = {}): Promise<LoadSummary> {
  const entry = childEntry();
  const child = fork(entry.path, [], {
    execArgv: entry.execArgv,
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    serialization: 'advanced',
  });
  return new Promise<LoadSummary>((resolve, reject) => {
    let settled = false;
    const settle = (fn: () => void) => {
      if (settled) return;
      settled = true;
      fn();
    };
    child.on('message', (raw) => {
      const msg = raw as ToParent;
      if (msg.type === 'progress') hooks.onProgress?.(msg.done);
      else if (msg.type === 'done') settle(() => resolve(msg.summary));
      else settle(() => reject(new Error(`load generator: ${msg.message}`)));
    });
    child.on('error', (err) => settle(() => reject(err)));
    child.on('exit', (code, signal) =>
      settle(() => reject(new Error(`load generator exited early (${signal ?? `status ${code}`})`))),
    );
    hooks.links?.((links) => {
      if (child.connected) child.send({ type: 'links', links } satisfies ToChild);
    });
    child.send({ type: 'plan', plan } satisfies ToChild);
  }).finally(() => {
    if (child.connected) child.disconnect();
  });
}
