/**
 * Shared pieces of the key server suites: a manual clock, a logger that keeps
 * lines, temporary folders, and real identity public keys.
 */
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import sodium from 'sodium-native';
import type { Clock } from '../../src/keyserver/clock.js';
import type { Logger } from '../../src/keyserver/logger.js';
import { copyFileSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { request, type IncomingHttpHeaders } from 'node:http';
import { defaultConfig } from '../../src/keyserver/cli/options.js';
import type { ServerConfig } from '../../src/keyserver/server-config.js';
import { startServer, type RunningServer, type StartOptions } from '../../src/keyserver/server.js';
import { tsxNode } from '../helpers/facility.js';

export class ManualClock implements Clock {
  constructor(public ms = Date.UTC(2030, 0, 1)) {}
  now(): number {
    return this.ms;
  }
  advance(ms: number): void {
    this.ms += ms;
  }
}

export class MemoryLogger implements Logger {
  lines: string[] = [];
  info(m: string): void {
    this.lines.push(`info ${m}`);
  }
  warn(m: string): void {
    this.lines.push(`WARN ${m}`);
  }
  error(m: string): void {
    this.lines.push(`ERROR ${m}`);
  }
  text(): string {
    return this.lines.join('\n');
  }
}

export function tempDir(prefix: string): { path: string; remove(): void } {
  const path = mkdtempSync(join(tmpdir(), `stash-ks-${prefix}-`));
  return { path, remove: () => rmSync(path, { recursive: true, force: true }) };
}

/** A real 65-byte identity public key: 0x01 | X25519 | Ed25519. */
export function identityPublicKey(): Buffer {
  const xpk = Buffer.alloc(32);
  const xsk = sodium.sodium_malloc(32);
  sodium.crypto_kx_keypair(xpk, xsk);
  const epk = Buffer.alloc(32);
  const esk = sodium.sodium_malloc(64);
  sodium.crypto_sign_keypair(epk, esk);
  sodium.sodium_memzero(xsk);
  sodium.sodium_memzero(esk);
  return Buffer.concat([Buffer.from([1]), xpk, epk]);
}

// ---- servers, mail sink, raw HTTP ------------------------------------------

export interface MailSink {
  command: string;
  dir: string;
  mails(): Array<{ argc: number; email: string; url: string }>;
  /** The path part of the last link sent to `email`. */
  lastLink(email: string): string;
  failNext(on: boolean): void;
  hang(seconds: number | undefined): void;
  env(): string;
}

export function mailSink(): MailSink & { remove(): void } {
  const dir = tempDir('mail');
  const command = join(dir.path, 'mail-sink.sh');
  copyFileSync(join(process.cwd(), 'test', 'fixtures', 'keyserver-mail-sink.sh'), command);
  const log = join(dir.path, 'mails.log');
  const mails = () =>
    existsSync(log)
      ? readFileSync(log, 'utf8')
          .trim()
          .split('\n')
          .filter(Boolean)
          .map((l) => {
            const [argc, email, url] = l.split(' ');
            return { argc: Number(argc), email: email!, url: url! };
          })
      : [];
  return {
    command,
    dir: dir.path,
    mails,
    lastLink(email) {
      const found = mails()
        .filter((m) => m.email === email)
        .pop();
      if (!found) throw new Error(`no mail to ${email}`);
      return found.url;
    },
    failNext(on) {
      if (on) writeFileSync(join(dir.path, 'fail'), '');
      else rmSync(join(dir.path, 'fail'), { force: true });
    },
    hang(seconds) {
      if (seconds === undefined) rmSync(join(dir.path, 'sleep'), { force: true });
      else writeFileSync(join(dir.path, 'sleep'), String(seconds));
    },
    env: () => readFileSync(join(dir.path, 'env.txt'), 'utf8'),
    remove: dir.remove,
  };
}

export interface TestServer extends RunningServer {
  stateDir: string;
  logger: MemoryLogger;
  sink: MailSink;
  stop(): Promise<void>;
}

/** A real server on 127.0.0.1:0 with a fresh state folder and the mail sink. */
export async function startTestServer(
  opts: {
    config?: Partial<ServerConfig>;
    clock?: Clock;
    timeouts?: StartOptions['timeouts'];
    mailTimeoutMs?: number;
    /** Reuse this state folder (kept at stop) instead of a fresh one. */
    stateDir?: string;
    replication?: StartOptions['replication'];
  } = {},
): Promise<TestServer> {
  const state = opts.stateDir !== undefined ? { path: opts.stateDir, remove: () => {} } : tempDir('state');
  const sink = mailSink();
  const logger = new MemoryLogger();
  const config: ServerConfig = {
    ...defaultConfig(),
    bind: { host: '127.0.0.1', port: 0 },
    stateDir: state.path,
    verificationEmailCommand: sink.command,
    ...opts.config,
  };
  let running: RunningServer;
  try {
    running = await startServer({
      config,
      logger,
      ...(opts.clock ? { clock: opts.clock } : {}),
      ...(opts.timeouts ? { timeouts: opts.timeouts } : {}),
      ...(opts.mailTimeoutMs !== undefined ? { mailTimeoutMs: opts.mailTimeoutMs } : {}),
      ...(opts.replication ? { replication: opts.replication } : {}),
      store: { sweepIntervalMs: 0, fetchFlushMs: 5 },
    });
  } catch (err) {
    state.remove();
    sink.remove();
    throw err;
  }
  return {
    ...running,
    stateDir: state.path,
    logger,
    sink,
    async stop() {
      await running.close();
      state.remove();
      sink.remove();
    },
  };
}

export interface RawResponse {
  status: number;
  headers: IncomingHttpHeaders;
  body: Buffer;
  text: string;
  json(): any;
}

/** One plain HTTP request (no client library logic in between). */
export function http(
  url: string,
  opts: { method?: string; headers?: Record<string, string>; body?: Buffer | string } = {},
): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method: opts.method ?? 'GET', headers: opts.headers ?? {} }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const body = Buffer.concat(chunks);
        resolve({
          status: res.statusCode ?? 0,
          headers: res.headers,
          body,
          text: body.toString('utf8'),
          json: () => JSON.parse(body.toString('utf8')),
        });
      });
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(opts.body);
  });
}

export const BINARY = 'application/vnd.stash.v1+binary';
export const JSON_TYPE = 'application/json';

export function postJson(
  base: string,
  body: unknown,
  path = '/v1/share',
  headers: Record<string, string> = {},
): Promise<RawResponse> {
  return http(`${base}${path}`, {
    method: 'POST',
    headers: { 'Content-Type': JSON_TYPE, ...headers },
    body: JSON.stringify(body),
  });
}

export function postBinary(base: string, body: Buffer, headers: Record<string, string> = {}): Promise<RawResponse> {
  return http(`${base}/v1/share`, { method: 'POST', headers: { 'Content-Type': BINARY, ...headers }, body });
}

/** `node --import tsx` argv prefix for child processes that run a TypeScript file. */
export const tsxNodeArgs = tsxNode;

/**
 * `stash_key_server` as a user runs it: node and bin/stash_key_server.js over
 * the compiled dist/ (`npm test` compiles before any suite; after a change to
 * src/, `npm run compile` before running a suite alone). Server processes start
 * from it, not through tsx: a tsx start costs about 0.3 s of CPU more, and the
 * key server suites start hundreds of servers.
 */
export const keyServerCommand = [process.execPath, join(process.cwd(), 'bin', 'stash_key_server.js')];
