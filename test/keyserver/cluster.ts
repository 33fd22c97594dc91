/**
 * Helpers for the cluster suites: free loopback ports chosen before the
 * servers start (each node's config names the others), ring configurations,
 * signed requests and polling with a deadline.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:net';
import type { ServerConfig } from '../../src/keyserver/server-config.js';
import { http, keyServerCommand, type RawResponse } from './harness.js';
import { signatureHeaders } from '../../src/keyserver/replication/signature.js';
import { BINARY_MEDIA_TYPE } from '../../src/keyserver/wire/messages.js';

export const TOKEN = 'cluster-test-token-0123456789abcdef';
export const CLUSTER = 'test-ring';

/** `n` ports that were free a moment ago (listen on 0, note, close). */
export async function freePorts(n: number): Promise<number[]> {
  const servers = await Promise.all(
    Array.from(
      { length: n },
      () =>
        new Promise<ReturnType<typeof createServer>>((resolve, reject) => {
          const s = createServer();
          s.once('error', reject);
          s.listen(0, '127.0.0.1', () => resolve(s));
        }),
    ),
  );
  const ports = servers.map((s) => (s.address() as { port: number }).port);
  await Promise.all(servers.map((s) => new Promise<void>((r) => s.close(() => r()))));
  return ports;
}

export const baseUrl = (port: number) => `http://127.0.0.1:${port}`;
export const replicateUrl = (port: number) => `${baseUrl(port)}/v1/replicate`;

/**
 * The configuration of node `i` of a ring over `ports` (ids 0..n-1): every
 * node lists the same topology and routes (owner k: primary k, then k+1),
 * replicates to its successor, and sees itself `active`, the others
 * `standby` in a pair (the spec's two-node rule) or `active` in a ring.
 */
export function ringConfig(i: number, ports: number[], extra: Partial<ServerConfig> = {}): Partial<ServerConfig> {
  const n = ports.length;
  return {
    bind: { host: '127.0.0.1', port: ports[i]! },
    publicUrl: baseUrl(ports[i]!),
    serverId: i,
    clusterId: CLUSTER,
    replicationToken: TOKEN,
    topologyServers: ports.map((p, id) => ({
      id,
      url: baseUrl(p),
      status: id === i || n > 2 ? ('active' as const) : ('standby' as const),
    })),
    routes: ports.map((_p, id) => ({ owner: id, primary: id, failovers: [(id + 1) % n] })),
    replicationPeerUrls: [replicateUrl(ports[(i + 1) % n]!)],
    rateLimitPerMinute: 0,
    verificationEmailRateLimitPerHour: 0,
    verificationEmailIpRateLimitPerHour: 0,
    ...extra,
  };
}

/** Polls `check` every 25 ms until it returns true; fails after `ms` naming `what`. */
export async function waitFor(what: string, check: () => boolean | Promise<boolean>, ms = 10_000): Promise<void> {
  const deadline = Date.now() + ms;
  for (;;) {
    if (await check()) return;
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for: ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** POSTs `body` to /v1/replicate signed with `token` (defaults: the test token and cluster, now). */
export function postSigned(
  base: string,
  body: Buffer,
  opts: {
    token?: string;
    clusterId?: string;
    nowMs?: number;
    mutate?: (headers: Record<string, string>, body: Buffer) => Buffer;
  } = {},
): Promise<RawResponse> {
  const headers: Record<string, string> = {
    'Content-Type': BINARY_MEDIA_TYPE,
    Accept: 'application/json',
    ...signatureHeaders(opts.token ?? TOKEN, opts.clusterId ?? CLUSTER, body, opts.nowMs ?? Date.now()),
  };
  const sent = opts.mutate ? opts.mutate(headers, body) : body;
  return http(`${base}/v1/replicate`, { method: 'POST', headers, body: sent });
}

/** Runs `stash_key_server <args>` to completion (30 s at most). */
export function runServerCommand(
  args: string[],
  env: NodeJS.ProcessEnv = process.env,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const [node, ...prefix] = keyServerCommand;
  return new Promise((resolve) => {
    const child = spawn(node!, [...prefix, ...args], { stdio: ['ignore', 'pipe', 'pipe'], env });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => {
      stdout += d;
    });
    child.stderr.on('data', (d) => {
      stderr += d;
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

export interface ServerProcess {
  child: ChildProcess;
  url: string;
  stderr(): string;
  /** SIGKILL, then waits for the exit. */
  kill(): Promise<void>;
  /** SIGTERM (clean shutdown), then waits for the exit. */
  stop(): Promise<void>;
}

function exited(child: ChildProcess): Promise<void> {
  return new Promise((r) =>
    child.exitCode !== null || child.signalCode !== null ? r() : child.once('exit', () => r()),
  );
}

/** `run` options that turn the request and mail rate limits off (a test's load comes from one address). */
export const LIMITS_OFF: readonly string[] = [
  '--rate-limit-per-minute',
  '0',
  '--verification-email-rate-limit-per-hour',
  '0',
  '--verification-email-ip-rate-limit-per-hour',
  '0',
];

/** Starts `stash_key_server run <args>` as a real process (with `env`, default this one's); resolves once it listens. */
export async function startServerProcess(args: string[], env: NodeJS.ProcessEnv = process.env): Promise<ServerProcess> {
  const [node, ...prefix] = keyServerCommand;
  const child = spawn(node!, [...prefix, 'run', ...args], { stdio: ['ignore', 'pipe', 'pipe'], env });
  let out = '';
  let err = '';
  child.stderr!.on('data', (d) => {
    err += d;
  });
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`server did not start: ${err}`)), 20_000);
    child.stdout!.on('data', (d) => {
      out += d;
      const m = /listening on (https?:\/\/127\.0\.0\.1:\d+)/.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]!);
      }
    });
    child.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`server exited ${code}: ${err}`));
    });
  });
  return {
    child,
    url,
    stderr: () => err,
    kill: async () => {
      child.kill('SIGKILL');
      await exited(child);
    },
    stop: async () => {
      child.kill('SIGTERM');
      await exited(child);
    },
  };
}
