/**
 * Pieces shared by the key server client suites: free and dead loopback
 * ports, a real server whose topology names itself (its port chosen before it
 * starts), confirming a verification link the way the page's button does, and
 * an asynchronous pty run (the harness's pty() is synchronous and would
 * block an in-process server).
 */
import { execFileSync, spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { request as httpsRequest } from 'node:https';
import { join } from 'node:path';
import { createServer } from 'node:net';
import type { Route, TopologyServer } from '../../src/keyserver/server-config.js';
import { http, startTestServer, type TestServer } from '../keyserver/harness.js';
import type { Clock } from '../../src/keyserver/clock.js';
import { stashBin } from '../helpers/agent.js';
import { python, ptyRunner, type CliEnv, type PtyResult } from './harness.js';

/** A loopback port that was free a moment ago (nothing listens on it now). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const address = s.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      s.close(() => resolve(port));
    });
  });
}

/** A URL where nothing listens: connections are refused at once. */
export async function deadUrl(): Promise<string> {
  return `http://127.0.0.1:${await freePort()}`;
}

/** No rate limits: the suites publish many times from 127.0.0.1. */
const noLimits = {
  rateLimitPerMinute: 0,
  verificationEmailRateLimitPerHour: 0,
  verificationEmailIpRateLimitPerHour: 0,
};

/**
 * A server with id `serverId` whose public topology lists itself at its real
 * URL plus `others`, with `routes` and the owners it serves as a promoted
 * standby.
 */
export async function startRoutedServer(opts: {
  serverId: number;
  others?: TopologyServer[];
  routes?: Route[];
  promotedOwners?: number[];
  clock?: Clock;
}): Promise<TestServer> {
  const port = await freePort();
  const self: TopologyServer = { id: opts.serverId, url: `http://127.0.0.1:${port}`, status: 'active' };
  return startTestServer({
    config: {
      ...noLimits,
      bind: { host: '127.0.0.1', port },
      serverId: opts.serverId,
      topologyServers: [self, ...(opts.others ?? [])].sort((a, b) => a.id - b.id),
      routes: opts.routes ?? [],
      promotedOwners: opts.promotedOwners ?? [],
    },
    ...(opts.clock ? { clock: opts.clock } : {}),
  });
}

/** A plain developer-like server (topology: itself only), without rate limits. */
export function startPlainServer(clock?: Clock): Promise<TestServer> {
  return startTestServer({ config: noLimits, ...(clock ? { clock } : {}) });
}

/** Confirms the last link mailed to `email` with the POST the page's button sends. */
export async function confirmLink(server: TestServer, email: string): Promise<void> {
  const link = server.sink.lastLink(email);
  const page = await http(link);
  if (page.status !== 200) throw new Error(`verification page: HTTP ${page.status}`);
  const res = await http(link, {
    method: 'POST',
    headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
    body: '',
  });
  if (res.status !== 200) throw new Error(`confirming ${link}: HTTP ${res.status}`);
}

/** Runs stash on a pseudo-terminal without blocking the event loop. */
export function ptyAsync(t: CliEnv, args: string[], script: Array<[string, string]>): Promise<PtyResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(python, [ptyRunner, process.execPath, stashBin, ...args], {
      env: { ...t.env, PTY_SCRIPT: JSON.stringify(script), PTY_TIMEOUT: '20' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => {
      out += d;
    });
    child.stderr.on('data', (d) => {
      err += d;
    });
    child.on('error', reject);
    child.on('close', () => {
      try {
        resolve(JSON.parse(out) as PtyResult);
      } catch {
        reject(new Error(`pty-run failed: ${err}`));
      }
    });
  });
}

/**
 * A throwaway CA and a server certificate for 127.0.0.1 signed by it, made by
 * openssl in `dir` (no private key is committed). Returns the PEM paths.
 */
export function testCa(dir: string): { ca: string; cert: string; key: string } {
  const openssl = (...args: string[]) =>
    execFileSync('openssl', args, { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] });
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  openssl('req', '-x509', ...ec, '-keyout', 'ca.key', '-out', 'ca.pem', '-days', '1', '-subj', '/CN=stash CLI test CA');
  openssl('req', ...ec, '-keyout', 'server.key', '-out', 'server.csr', '-subj', '/CN=127.0.0.1');
  writeFileSync(join(dir, 'san.cnf'), 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n');
  openssl(
    'x509',
    '-req',
    '-in',
    'server.csr',
    '-CA',
    'ca.pem',
    '-CAkey',
    'ca.key',
    '-CAcreateserial',
    '-out',
    'server.pem',
    '-days',
    '1',
    '-extfile',
    'san.cnf',
  );
  return { ca: join(dir, 'ca.pem'), cert: join(dir, 'server.pem'), key: join(dir, 'server.key') };
}

/** Confirms a link over HTTPS, trusting `ca` (the POST of the page's button). */
export function confirmHttps(link: string, ca: Buffer): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = httpsRequest(
      link,
      { method: 'POST', ca, headers: { 'Content-Type': 'application/x-www-form-urlencoded', 'Content-Length': '0' } },
      (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
      },
    );
    req.on('error', reject);
    req.end();
  });
}
