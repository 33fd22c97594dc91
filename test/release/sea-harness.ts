/**
 * Pieces of the single executable suites: where the executables are (beside
 * the release tarball that `npm run release` wrote, as .ci/run passes it in
 * STASH_TEST_TARBALL; otherwise built here by scripts/release/sea.js, about
 * 20 s, from the compiled dist/), a server process started from one, and the
 * publish, verification and fetch flow over loopback HTTP.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fetchShare, publish } from '../../src/keyserver/client.js';
import { identityPublicKey } from '../keyserver/harness.js';

export const version = (JSON.parse(readFileSync('package.json', 'utf8')) as { version: string }).version;
export const AARCH64_SYSROOT = '/usr/aarch64-linux-gnu';

const tarball = process.env.STASH_TEST_TARBALL ?? '';
let builtDir: string | undefined;

/** The single executable of `target` (linux-x64, linux-arm64): the release's, or one built now. */
export function singleExecutable(target: 'linux-x64' | 'linux-arm64'): string {
  const name = `stash_key_server-${version}-${target}`;
  if (tarball !== '') {
    const path = join(dirname(tarball), name);
    if (!existsSync(path)) throw new Error(`${path} is missing: npm run release writes it beside the tarball`);
    return path;
  }
  const path = builtDir ? join(builtDir, name) : '';
  if (path && existsSync(path)) return path;
  builtDir ??= mkdtempSync(join(tmpdir(), 'stash-sea-test-'));
  const r = spawnSync(process.execPath, ['scripts/release/sea.js', '--out', builtDir, '--only', target], {
    encoding: 'utf8',
    timeout: 300_000,
  });
  if (r.status !== 0)
    throw new Error(
      `scripts/release/sea.js --only ${target} failed (needs npm run compile first):\n${r.stdout}${r.stderr}`,
    );
  return join(builtDir, name);
}

/** Removes executables this suite built (never the release's). */
export function removeBuilt(): void {
  if (builtDir) rmSync(builtDir, { recursive: true, force: true });
  builtDir = undefined;
}

/** The absolute path of a command on this machine's PATH (the children get no PATH). */
export function which(cmd: string): string {
  const r = spawnSync('sh', ['-c', `command -v ${cmd}`], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`${cmd} is not installed`);
  return r.stdout.trim();
}

/** A loopback port that was free a moment ago. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer()
      .once('error', reject)
      .listen(0, '127.0.0.1', () => {
        const a = s.address();
        s.close(() => resolve(typeof a === 'object' && a ? a.port : 0));
      });
  });
}

export interface SeaServer {
  child: ChildProcess;
  url: string;
  stdout(): string;
  stderr(): string;
  /** SIGTERM, then the exit status (SIGKILL after 15 s). */
  stop(): Promise<number | null>;
}

/** One request over http or https (trusting `ca`), on a connection of its own; the status. */
export function request(
  url: string,
  opts: { method?: string; headers?: Record<string, string>; body?: string; ca?: Buffer } = {},
): Promise<number> {
  return new Promise((resolve, reject) => {
    const options = {
      method: opts.method ?? 'GET',
      headers: opts.headers ?? {},
      agent: false as const,
      ...(opts.ca ? { ca: opts.ca } : {}),
    };
    const req = (url.startsWith('https:') ? httpsRequest : httpRequest)(url, options, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', reject);
    req.end(opts.body);
  });
}

/**
 * Runs `command` (the executable, or qemu and the executable) with `args`
 * and exactly `env`; resolves once it prints its listening line (https
 * trusting `ca`).
 */
export function startSea(
  command: string[],
  args: string[],
  env: Record<string, string>,
  timeoutMs = 60_000,
  ca?: Buffer,
): Promise<SeaServer> {
  const child = spawn(command[0]!, [...command.slice(1), ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stdout!.on('data', (d) => {
    out += d;
  });
  child.stderr!.on('data', (d) => {
    err += d;
  });
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  const server = (url: string): SeaServer => ({
    child,
    url,
    stdout: () => out,
    stderr: () => err,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
      const code = await exited;
      clearTimeout(timer);
      return code;
    },
  });
  let seen = false;
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`no listening line within ${timeoutMs} ms:\n${out}${err}`));
    }, timeoutMs);
    child.stdout!.on('data', () => {
      const m = /listening on (https?:\/\/127\.0\.0\.1:\d+)/.exec(out);
      if (m && !seen) {
        seen = true;
        // One answered request: the server has run on past the line, to where it takes SIGTERM (run.ts
        // prints the line just before it listens for the signal; a SIGTERM in between would kill it outright).
        request(`${m[1]}/v1/status`, ca ? { ca } : {}).then(() => {
          clearTimeout(timer);
          resolve(server(m[1]!));
        }, reject);
      }
    });
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`exited (${signal ?? code}) before listening:\n${out}${err}`));
    });
  });
}

/** Confirms a verification link the way its page's button does (GET the page, POST the form). */
export async function confirm(link: string, ca?: Buffer): Promise<void> {
  const page = await request(link, ca ? { ca } : {});
  if (page !== 200) throw new Error(`verification page ${link}: HTTP ${page}`);
  const posted = await request(link, {
    method: 'POST',
    headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
    body: '',
    ...(ca ? { ca } : {}),
  });
  if (posted !== 200) throw new Error(`confirming ${link}: HTTP ${posted}`);
}

export interface FlowResult {
  code: string;
  verification: string;
  /** The fetch before the link was confirmed: refused. */
  refusedBeforeConfirm: boolean;
  fetched: Array<{ sameKey: boolean; email: string }>;
}

/**
 * Publishes a fresh identity key for `email`, confirms the link that
 * `linkOf` finds (the server's console in developer mode, a mail sink
 * otherwise) and fetches the share `fetches` times, each on a new connection.
 * Over https, `ca` is the certificate authority trusted.
 */
export async function publishVerifyFetch(
  url: string,
  email: string,
  linkOf: () => string | undefined,
  fetches = 1,
  ca?: Buffer,
): Promise<FlowResult> {
  const key = identityPublicKey();
  const trust = ca ? { ca } : {};
  const published = await publish(url, key, email, trust);
  const refusedBeforeConfirm = await fetchShare(url, published.code, trust).then(
    () => false,
    () => true,
  );
  let link: string | undefined;
  for (let i = 0; i < 100 && !link; i++) {
    link = linkOf();
    if (!link) await new Promise((r) => setTimeout(r, 50));
  }
  if (!link) throw new Error(`no verification link for ${email}`);
  await confirm(link, ca);
  const fetched = [];
  for (let i = 0; i < fetches; i++) {
    // Connection: close, so that each fetch is a connection of its own (handed to the processes in turn).
    const share = await fetchShare(url, published.code, { ...trust, headers: { Connection: 'close' } });
    fetched.push({ sameKey: share.publicKey.equals(key), email: share.email });
  }
  return { code: published.code, verification: published.verification, refusedBeforeConfirm, fetched };
}

/** The verification link printed on a developer server's console for `email` (masked there). */
export function consoleLink(stdout: string): string | undefined {
  return [...stdout.matchAll(/verification link for \S+: (\S+)/g)].pop()?.[1];
}
