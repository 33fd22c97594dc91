// wrk (the C load generator, Debian package `wrk`) for the key server
// scripts: a Node client cannot saturate a bare node:http server on one core
// (docs/benchmarks.md), which flatters every ratio to it. Also the pieces
// the wrk scripts share: a preloaded store, the real `stash_key_server run`
// process, one exact answer of it, and a bare node:http server that answers
// those very bytes with the same headers.
import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { connect, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { bin, dist, hasCommand, pinned, root } from './lib.js';

export const haveWrk = hasCommand('wrk');

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** A loopback port free at this moment (the kernel picks it). */
export const freePort = () =>
  new Promise((resolve, reject) => {
    const s = createServer()
      .once('error', reject)
      .listen(0, '127.0.0.1', () => {
        const { port } = s.address();
        s.close(() => resolve(port));
      });
  });

/** A Lua string literal of arbitrary bytes (decimal escapes: wrk's LuaJIT reads them). */
function luaBytes(buf) {
  return `"${[...buf].map((b) => `\\${b}`).join('')}"`;
}

/** A wrk script sending POST `path` with `body` and `headers` on every request. */
export function wrkScript(dir, name, { path, body, headers }) {
  const file = join(dir, `${name}.lua`);
  const lines = ['wrk.method = "POST"', `wrk.path = "${path}"`, `wrk.body = ${luaBytes(body)}`];
  for (const [k, v] of Object.entries(headers)) lines.push(`wrk.headers["${k}"] = "${v}"`);
  writeFileSync(file, `${lines.join('\n')}\n`);
  return file;
}

function toMs(text) {
  const m = /^([\d.]+)(us|ms|s|m)$/.exec(text);
  if (!m) return NaN;
  return Number(m[1]) * { us: 0.001, ms: 1, s: 1000, m: 60000 }[m[2]];
}

/**
 * Runs wrk once against `url`; resolves with requests per second, the
 * latency percentiles and the failures it saw (socket errors, non-2xx).
 * `cpu` pins it (undefined: unpinned).
 */
export async function runWrk({ url, script, seconds, connections = 64, threads = 1, cpu }) {
  const argv = pinned(cpu, [
    'wrk',
    '-t',
    String(threads),
    '-c',
    String(connections),
    '-d',
    `${seconds}s`,
    '--latency',
    '-s',
    script,
    url,
  ]);
  const r = spawnSync(argv[0], argv.slice(1), { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`wrk failed (${r.status}): ${r.stderr}`);
  const out = r.stdout;
  const rps = Number(/Requests\/sec:\s+([\d.]+)/.exec(out)?.[1]);
  const total = Number(/(\d+) requests in/.exec(out)?.[1]);
  const pct = (p) => toMs(new RegExp(`^\\s+${p}%\\s+(\\S+)`, 'm').exec(out)?.[1] ?? '');
  const non2xx = Number(/Non-2xx or 3xx responses:\s+(\d+)/.exec(out)?.[1] ?? 0);
  const sock = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(out);
  const socketErrors = sock ? sock.slice(1).reduce((n, x) => n + Number(x), 0) : 0;
  if (!(rps > 0)) throw new Error(`wrk printed no throughput:\n${out}`);
  return { rps, total, p50: pct(50), p99: pct(99), errors: non2xx + socketErrors, argv, output: out };
}

/**
 * A temporary store of `count` verified shares (30-day TTL); resolves with
 * its folder and the display codes. `remove()` deletes it.
 */
export async function preloadedStore(count) {
  const { preloadShares } = await import(dist('keyserver/bench/bench-server.js'));
  const { benchPublicKey } = await import(dist('keyserver/bench/requests.js'));
  const { ShareStore } = await import(dist('keyserver/store/share-store.js'));
  const { defaultConfig } = await import(dist('keyserver/cli/options.js'));
  const work = mkdtempSync(join(tmpdir(), 'stash-bench-wrk-'));
  const dir = join(work, 'state');
  const quiet = {
    info() {},
    warn: (m) => process.stderr.write(`${m}\n`),
    error: (m) => process.stderr.write(`${m}\n`),
  };
  const store = await ShareStore.open({
    dir,
    serverId: 0,
    originEpoch: Date.now(),
    compactMinBytes: 1 << 30,
    clock: { now: () => Date.now() },
    logger: quiet,
  });
  const keys = Array.from({ length: 16 }, benchPublicKey);
  const codes = await preloadShares(store, { ...defaultConfig(), shareTtlSeconds: TTL }, count, keys);
  await store.close();
  return { dir, codes, keys, remove: () => rmSync(work, { recursive: true, force: true }) };
}

export const TTL = 30 * 24 * 3600;

/**
 * Starts the real `stash_key_server run` over `dir` on a free loopback port,
 * every request limit off; resolves once it answers. `cpu` pins it (taskset
 * is inherited by the processes it starts). `extra` adds options.
 */
export async function startKeyServer({ dir, cpu, extra = [], nodeFlags = [], env = {} }) {
  const port = await freePort();
  const argv = pinned(cpu, [
    process.execPath,
    ...nodeFlags,
    bin('stash_key_server.js'),
    'run',
    '--state-dir',
    dir,
    '--bind',
    `127.0.0.1:${port}`,
    '--rate-limit-per-minute',
    '0',
    '--share-ttl',
    String(TTL),
    ...extra,
  ]);
  const child = spawn(argv[0], argv.slice(1), {
    cwd: root,
    stdio: ['ignore', 'ignore', 'pipe'],
    env: { ...process.env, ...env },
  });
  let log = '';
  child.stderr.on('data', (d) => {
    log += d;
  });
  const url = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 300; i++) {
    if (child.exitCode !== null) throw new Error(`server exited: ${log.slice(-2000)}`);
    try {
      if ((await fetch(`${url}/v1/status`)).ok) return { child, url, log: () => log, stop: () => stop(child) };
    } catch {
      /* not listening yet */
    }
    await sleep(100);
  }
  child.kill('SIGKILL');
  throw new Error('server did not answer within 30 s');
}

export function stop(child) {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  const done = once(child, 'close');
  child.kill('SIGTERM');
  return done;
}

/** One raw HTTP/1.1 exchange: resolves with the answer's bytes (status line, headers, body). */
export function rawExchange(url, { path, body, headers }) {
  const { hostname, port } = new URL(url);
  const head = [
    `POST ${path} HTTP/1.1`,
    `Host: ${hostname}:${port}`,
    ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`),
    `Content-Length: ${body.length}`,
    'Connection: close',
    '',
    '',
  ].join('\r\n');
  return new Promise((resolve, reject) => {
    const chunks = [];
    const s = connect(Number(port), hostname, () => s.write(Buffer.concat([Buffer.from(head, 'latin1'), body])));
    s.on('data', (d) => chunks.push(d));
    s.on('error', reject);
    s.on('close', () => resolve(Buffer.concat(chunks)));
  });
}

/** Splits a raw answer into status, header pairs (Date, Connection and Keep-Alive left out: node:http adds them) and body. */
export function parseAnswer(raw) {
  const end = raw.indexOf('\r\n\r\n');
  const lines = raw.subarray(0, end).toString('latin1').split('\r\n');
  const status = Number(lines[0].split(' ')[1]);
  const headers = [];
  for (const line of lines.slice(1)) {
    const at = line.indexOf(':');
    const name = line.slice(0, at);
    if (/^(date|connection|keep-alive)$/i.test(name)) continue;
    headers.push([name, line.slice(at + 1).trim()]);
  }
  return { status, headers, body: raw.subarray(end + 4) };
}

/** The answer without its Date header (which changes every second), for byte comparisons. */
export const withoutDate = (raw) => raw.toString('latin1').replace(/\r\nDate: [^\r]*/, '');

/**
 * Starts bench/bare-server.js answering exactly `answer` (status, headers in
 * order, body); `cpu` pins it. Resolves with its URL and a stop function.
 */
export async function startExactBare(answer, cpu) {
  const spec = JSON.stringify({ status: answer.status, headers: answer.headers, body: answer.body.toString('base64') });
  const argv = pinned(cpu, [process.execPath, join(root, 'bench', 'bare-server.js'), '--exact', spec]);
  const child = spawn(argv[0], argv.slice(1), { cwd: root, stdio: ['ignore', 'pipe', 'inherit'] });
  const [line] = await once(child.stdout, 'data');
  return { child, url: String(line).trim(), stop: () => stop(child) };
}

/** PSS and RSS of a process in bytes (/proc/PID/smaps_rollup; Linux). */
export function memoryOf(pid) {
  const text = readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8');
  const kb = (name) => Number(new RegExp(`^${name}:\\s+(\\d+) kB`, 'm').exec(text)?.[1] ?? 0) * 1024;
  return { rss: kb('Rss'), pss: kb('Pss') };
}

export const haveNginx = hasCommand('nginx');

/**
 * Starts nginx (one process: no master, no daemon; `cpu` pins it) answering
 * every request with `return 200` and a body of `bodyBytes` bytes of 'a'
 * under `contentType`, from a private prefix folder; keep-alive unbounded,
 * as node:http's. Resolves with its URL and a stop function.
 */
export async function startNginx({ bodyBytes, contentType, cpu }) {
  const dir = mkdtempSync(join(tmpdir(), 'stash-bench-nginx-'));
  const port = await freePort();
  writeFileSync(
    join(dir, 'nginx.conf'),
    `master_process off;
daemon off;
worker_processes 1;
pid ${join(dir, 'nginx.pid')};
error_log ${join(dir, 'error.log')} warn;
events { worker_connections 1024; }
http {
  access_log off;
  keepalive_requests 100000000;
  keepalive_timeout 5s;
  client_body_temp_path ${join(dir, 'body')};
  proxy_temp_path ${join(dir, 'proxy')};
  fastcgi_temp_path ${join(dir, 'fastcgi')};
  uwsgi_temp_path ${join(dir, 'uwsgi')};
  scgi_temp_path ${join(dir, 'scgi')};
  server {
    listen 127.0.0.1:${port};
    default_type ${contentType};
    location / { return 200 "${'a'.repeat(bodyBytes)}"; }
  }
}
`,
  );
  const argv = pinned(cpu, ['nginx', '-p', dir, '-c', join(dir, 'nginx.conf')]);
  const child = spawn(argv[0], argv.slice(1), { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] });
  let log = '';
  child.stderr.on('data', (d) => {
    log += d;
  });
  const url = `http://127.0.0.1:${port}`;
  const remove = () => rmSync(dir, { recursive: true, force: true });
  for (let i = 0; i < 100; i++) {
    if (child.exitCode !== null) {
      remove();
      throw new Error(`nginx exited: ${log.slice(-2000)}`);
    }
    try {
      if ((await fetch(url, { method: 'POST', body: 'x' })).ok)
        return {
          child,
          url,
          stop: async () => {
            await stop(child);
            remove();
          },
        };
    } catch {
      /* not listening yet */
    }
    await sleep(50);
  }
  child.kill('SIGKILL');
  remove();
  throw new Error('nginx did not answer within 5 s');
}
