/**
 * Two real key servers for comparing answers byte for byte: one with the
 * front on the raw connection (http/fetch-front.ts), one with the Koa app
 * alone; shares seeded in both, raw requests on fresh connections.
 */
import { createHash } from 'node:crypto';
import { once } from 'node:events';
import { connect, type Socket } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import * as assert from 'uvu/assert';
import { defaultConfig } from '../../src/keyserver/cli/options.js';
import type { ServerConfig } from '../../src/keyserver/server-config.js';
import { startServer, type RunningServer, type Timeouts } from '../../src/keyserver/server.js';
import { encodeShareRequest } from '../../src/keyserver/wire/messages.js';
import { BINARY, JSON_TYPE, type ManualClock, MemoryLogger, identityPublicKey, tempDir } from './harness.js';

export const key = identityPublicKey();

export interface Server {
  running: RunningServer;
  logger: MemoryLogger;
  dir: string;
  /** Verification links sent, by address. */
  links: Map<string, string>;
  stop(): Promise<void>;
}

export async function start(
  clock: ManualClock,
  fastFetch: boolean,
  config: Partial<ServerConfig> = {},
  dir?: string,
  fetchFlushMs = 5,
  timeouts: Partial<Timeouts> = {},
): Promise<Server> {
  const state = dir !== undefined ? { path: dir, remove: () => {} } : tempDir('fast');
  const logger = new MemoryLogger();
  const links = new Map<string, string>();
  const running = await startServer({
    config: {
      ...defaultConfig(),
      bind: { host: '127.0.0.1', port: 0 },
      stateDir: state.path,
      developer: true,
      ...config,
    },
    clock,
    logger,
    mailer: {
      send: async (email: string, url: string) => {
        links.set(email, url);
        return { verification: 'sent', message: 'test' };
      },
    },
    timeouts: { bodyMs: 300, ...timeouts },
    store: { sweepIntervalMs: 0, fetchFlushMs },
    fastFetch,
  });
  return {
    running,
    logger,
    dir: state.path,
    links,
    stop: async () => {
      await running.close();
      state.remove();
    },
  };
}

/** Puts the same share in a store: verified unless `pending`. */
export async function seed(
  s: Server,
  code: string,
  email: string,
  now: number,
  ttlMs: number,
  pending = false,
): Promise<void> {
  const tokenHash = createHash('sha256').update(code).digest();
  await s.running.store.put({ code, publicKey: key, email, createdAt: now, expiresAt: now + ttlMs, tokenHash });
  if (!pending) await s.running.store.verify(tokenHash);
}

/** An answer with its Date header's value blanked (the one part two servers' answers may differ in). */
const blankDate = (answer: string): string => answer.replace(/\r\nDate: [^\r]*/, '\r\nDate: -');

/** Sends raw bytes on a fresh connection; the whole answer, Date header blanked. */
export function raw(url: string, bytes: Buffer | string, pauseAfter?: number): Promise<string> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const sock = connect(Number(port), hostname);
    const chunks: Buffer[] = [];
    sock.on('data', (c: Buffer) => {
      chunks.push(c);
      // A request cut short keeps node:http's side open until its request timeout: stop once answered.
      if (pauseAfter !== undefined) setTimeout(() => sock.destroy(), 100);
    });
    sock.on('error', reject);
    sock.on('close', () => resolve(blankDate(Buffer.concat(chunks).toString('latin1'))));
    const data = typeof bytes === 'string' ? Buffer.from(bytes, 'latin1') : bytes;
    // Not end(): a half-closed socket is dropped by node:http before a slow (publish) answer; Connection: close ends it.
    sock.write(pauseAfter === undefined ? data : data.subarray(0, pauseAfter)); // with pauseAfter, the rest never comes
  });
}

export function post(body: Buffer | string, headers: Record<string, string>): string {
  const b = Buffer.from(body);
  const lines = Object.entries({ Host: 'x', Connection: 'close', 'Content-Length': String(b.length), ...headers }).map(
    ([k, v]) => `${k}: ${v}\r\n`,
  );
  return `POST /v1/share HTTP/1.1\r\n${lines.join('')}\r\n${b.toString('latin1')}`;
}

export const fetchBin = (code: string, headers: Record<string, string> = {}) =>
  post(encodeShareRequest({ op: 'fetch', code }), { 'Content-Type': BINARY, ...headers });
export const fetchJson = (code: string, headers: Record<string, string> = {}) =>
  post(JSON.stringify({ op: 'fetch', code }), { 'Content-Type': JSON_TYPE, ...headers });

export async function same(
  fast: Server,
  koa: Server,
  bytes: string,
  what: string,
  pauseAfter?: number,
): Promise<string> {
  const a = await raw(fast.running.url, bytes, pauseAfter);
  const b = await raw(koa.running.url, bytes, pauseAfter);
  assert.ok(a.startsWith('HTTP/1.1 '), `${what}: an answer (${JSON.stringify(a.slice(0, 60))})`);
  assert.is(a, b, `${what}: same bytes from the front and from Koa`);
  return a;
}

export const status = (answer: string) => Number(answer.split(' ')[1]);

/** A usual keep-alive fetch, as wrk or the stash client sends it. */
export const usual = (code: string, extra: Record<string, string> = {}): string => {
  const body = encodeShareRequest({ op: 'fetch', code });
  const lines = Object.entries({ Host: 'x', 'Content-Type': BINARY, 'Content-Length': String(body.length), ...extra })
    .map(([k, v]) => `${k}: ${v}\r\n`)
    .join('');
  return `POST /v1/share HTTP/1.1\r\n${lines}\r\n${body.toString('latin1')}`;
};

/** Complete answers at the start of `data` (Content-Length framed), and what is left. */
export function answersIn(data: string): { answers: string[]; rest: string } {
  const answers: string[] = [];
  let at = 0;
  for (;;) {
    const headEnd = data.indexOf('\r\n\r\n', at);
    if (headEnd < 0) break;
    const length = /\r\nContent-Length: (\d+)/i.exec(data.slice(at, headEnd));
    const end = headEnd + 4 + Number(length?.[1] ?? 0);
    if (end > data.length) break;
    answers.push(blankDate(data.slice(at, end)));
    at = end;
  }
  return { answers, rest: data.slice(at) };
}

/** One connection: writes each piece (a pause between them), reads `count` answers or all until the server closes; the socket stays open. */
export async function exchange(
  url: string,
  pieces: string[],
  count: number,
  ca?: Buffer,
): Promise<{ answers: string[]; socket: Socket; closed: Promise<void> }> {
  const { hostname, port } = new URL(url);
  const socket = url.startsWith('https:')
    ? tlsConnect({ host: hostname, port: Number(port), ...(ca ? { ca } : {}) })
    : connect(Number(port), hostname);
  const closed = once(socket, 'close').then(() => undefined);
  let data = '';
  const got = new Promise<string[]>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`${count} answers not read in 10 s; got ${JSON.stringify(data)}`)),
      10_000,
    );
    socket.on('data', (c: Buffer) => {
      data += c.toString('latin1');
      const { answers } = answersIn(data);
      if (answers.length >= count) {
        clearTimeout(timer);
        resolve(answers);
      }
    });
    socket.on('error', () => {}); // a reset after a refusal: 'close' follows with what was read
    socket.on('close', () => {
      clearTimeout(timer);
      resolve(answersIn(data).answers);
    });
  });
  await once(socket, url.startsWith('https:') ? 'secureConnect' : 'connect');
  for (const [i, p] of pieces.entries()) {
    if (i > 0) await new Promise((r) => setTimeout(r, 50));
    socket.write(Buffer.from(p, 'latin1'));
  }
  return { answers: await got, socket, closed };
}
