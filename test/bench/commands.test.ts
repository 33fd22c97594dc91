/**
 * The benchmark commands and scripts, in tiny runs: every `stash_key_server
 * bench-*` command (TypeScript sources, a real server and a forked load
 * generator) prints a report whose counts match the request, usage errors
 * exit 64, and every bench/ script (compiled dist/) prints its markdown
 * table in quick mode. The figures of such short runs mean nothing; that
 * they are produced, consistent and positive does.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { spawn } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { LatencyHistogram } from '../../src/keyserver/bench/histogram.js';
import { RawHttpClient } from '../../src/keyserver/bench/raw-client.js';
import { haveCommand, needFacility, strict } from '../helpers/facility.js';
import { keyServerCommand, tempDir } from '../keyserver/harness.js';

// The list `npm run bench` runs (a plain JavaScript module: no types to check).
const { SCRIPTS } = (await import('../../bench/scripts.js' as string)) as { SCRIPTS: string[] };

interface Ran {
  code: number | null;
  stdout: string;
  stderr: string;
}

function runArgv(argv: string[], env: NodeJS.ProcessEnv = {}, timeoutMs = 30_000): Promise<Ran> {
  return new Promise((resolve, reject) => {
    const child = spawn(argv[0]!, argv.slice(1), {
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => {
      stdout += d;
    });
    child.stderr.on('data', (d) => {
      stderr += d;
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

const keyServer = (args: string[]) => runArgv([...keyServerCommand, ...args]);

interface Report {
  command: string;
  requests: number;
  errors: number;
  seconds: number;
  requests_per_second: number;
  latency_ms: { p50: number; p90: number; p99: number; max: number };
  server_peak_rss_bytes: number;
  process_peak_rss_bytes: number;
  store_bytes: number;
  live_shares: number;
  concurrency: number;
  encoding: string;
  request_bytes: number;
  response_bytes: number;
  preload_shares: number;
  extra: Record<string, number>;
}

async function bench(args: string[]): Promise<Report> {
  const r = await keyServer([...args, '--json']);
  assert.is(r.code, 0, `${args.join(' ')}: ${r.stderr}`);
  const lines = r.stdout.trim().split('\n');
  assert.is(lines.length, 1, 'one JSON line on stdout');
  const report = JSON.parse(lines[0]!) as Report;
  assert.is(report.command, args[0]);
  return report;
}

function assertSane(r: Report, requests: number): void {
  assert.is(r.requests, requests);
  assert.is(r.errors, 0);
  assert.ok(r.seconds > 0 && r.requests_per_second > 0, 'throughput is positive');
  const l = r.latency_ms;
  assert.ok(l.p50 > 0 && l.p50 <= l.p90 && l.p90 <= l.p99 && l.p99 <= l.max, `ordered latencies: ${JSON.stringify(l)}`);
  assert.ok(r.server_peak_rss_bytes > 10 * 1048576, 'a peak RSS of a real process');
  assert.ok(
    r.process_peak_rss_bytes >= r.server_peak_rss_bytes * 0.99,
    'the whole run peaks at least as high as its timed phase',
  );
  assert.ok(r.store_bytes > 0, 'the store has bytes on disk');
}

test('bench-store: durable writes then lookups; --state-dir keeps the store and refuses one that exists', async () => {
  const dir = tempDir('bench');
  try {
    const r = await bench(['bench-store', '--requests', '200', '--concurrency', '16', '--state-dir', dir.path]);
    assertSane(r, 200);
    assert.is(r.concurrency, 16);
    assert.is(r.live_shares, 200);
    assert.is(r.extra.lookups, 200);
    assert.ok(r.extra.lookups_per_second! > 0);
    assert.ok(r.request_bytes > 300 && r.request_bytes <= 512, `records approach --payload-bytes: ${r.request_bytes}`);
    const log = join(dir.path, 'store.log');
    assert.ok(existsSync(log), 'the store given with --state-dir is kept');
    assert.is(statSync(log).size, r.store_bytes);
    assert.ok(r.store_bytes >= 200 * r.request_bytes, 'every write is on disk');
    // A folder that holds a store (a --config meant for the real server, say) is refused.
    const again = await keyServer(['bench-http', '--requests', '10', '--state-dir', dir.path]);
    assert.is(again.code, 64, again.stderr);
    assert.match(again.stderr, /already holds a store/);
    assert.is(statSync(log).size, r.store_bytes, 'the store is untouched');
  } finally {
    dir.remove();
  }
});

test('bench-store keeps --disk-cap-bytes: a small cap refuses writes past its publish limit (STORE_FULL, exit 1)', async () => {
  // 1 MB cap: store.log takes publishes up to about 282 kB, fewer than 1,000 records of about 400 bytes.
  const ran = await keyServer([
    'bench-store',
    '--json',
    '--requests',
    '1000',
    '--payload-bytes',
    '4096',
    '--disk-cap-bytes',
    '1000000',
  ]);
  assert.is(ran.code, 1, ran.stderr);
  const r = JSON.parse(ran.stdout) as Report & { first_error?: string };
  assert.ok(r.errors > 0 && r.errors < 1000, `some writes refused: ${r.errors}`);
  assert.match(r.first_error ?? '', /STORE_FULL|disk cap|full/i);
  assert.match(ran.stderr, /operations failed/);
});

test('bench-http: publishes in JSON padded to --payload-bytes, and binary with 0', async () => {
  const json = await bench(['bench-http', '--requests', '200']);
  assertSane(json, 200);
  assert.is(json.encoding, 'json');
  assert.is(json.request_bytes, 512);
  assert.is(json.concurrency, 64, 'automatic concurrency');
  assert.is(json.live_shares, 200);
  const binary = await bench(['bench-http', '--requests', '200', '--payload-bytes', '0', '--preload-shares', '50']);
  assertSane(binary, 200);
  assert.is(binary.encoding, 'binary');
  assert.ok(binary.request_bytes < 120, 'the compact body');
  assert.is(binary.live_shares, 250, 'preloaded shares plus the published ones');
});

test('bench-http-fetch: fetches of preloaded shares', async () => {
  const r = await bench([
    'bench-http-fetch',
    '--requests',
    '200',
    '--preload-shares',
    '40',
    '--payload-bytes',
    '0',
    '--concurrency',
    '8',
  ]);
  assertSane(r, 200);
  assert.is(r.preload_shares, 40);
  assert.is(r.live_shares, 40);
  assert.is(r.concurrency, 8);
  assert.ok(r.response_bytes > 65, 'the answer holds the 65-byte key');
});

test('bench-http-flow: publish, confirm, fetch; per-step latencies', async () => {
  const r = await bench(['bench-http-flow', '--requests', '60']);
  assertSane(r, 60);
  assert.is(r.live_shares, 60);
  for (const step of ['publish', 'confirm', 'fetch']) assert.ok(r.extra[`${step}_p50_ms`]! > 0, `${step} latency`);
  // Each flow got its link pushed (a missing one fails the flow): 60 flows, no error, and both CPU figures.
  assert.ok(r.extra.server_cpu_us_per_op! > 0, 'the server CPU per flow');
  assert.ok(r.extra.load_cpu_share! > 0 && r.extra.load_cpu_share! <= 1.5, `load CPU share ${r.extra.load_cpu_share}`);
});

test('STASH_BENCH_CLIENT=node-http measures with node:http instead of the lean client', async () => {
  const r = await runArgv(
    [...keyServerCommand, 'bench-http-fetch', '--requests', '100', '--preload-shares', '10', '--json'],
    { STASH_BENCH_CLIENT: 'node-http' },
  );
  assert.is(r.code, 0, r.stderr);
  assertSane(JSON.parse(r.stdout) as Report, 100);
});

test('the lean client reads Content-Length answers on one keep-alive socket and refuses chunked ones', async () => {
  const sockets = new Set<unknown>();
  const server = createServer((req, res) => {
    sockets.add(req.socket);
    req.resume();
    req.on('end', () => {
      if (req.url === '/chunked')
        res.write('x', () => res.end()); // write before end: chunked, no Content-Length
      else res.writeHead(201, { 'Content-Length': '5' }).end('hello');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const client = new RawHttpClient(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
  try {
    for (let i = 0; i < 3; i++) {
      const a = await client.send('POST', '/x', { 'Content-Type': 'text/plain' }, Buffer.from('body'));
      assert.is(a.status, 201);
      assert.is(a.body.toString(), 'hello');
    }
    assert.is(sockets.size, 1, 'one connection, kept alive');
    const refused = await client.send('GET', '/chunked', {}, undefined).then(
      () => 'answered',
      (e: Error) => e.message,
    );
    assert.match(refused, /without Content-Length/);
  } finally {
    client.close();
    server.close();
  }
});

test('text report without --json; no progress line when stderr is not a terminal', async () => {
  const r = await keyServer(['bench-http-fetch', '--requests', '50', '--preload-shares', '10']);
  assert.is(r.code, 0, r.stderr);
  assert.match(r.stdout, /^bench-http-fetch: 50 requests, 0 errors in [\d.]+ s$/m);
  assert.match(r.stdout, /latency {6}p50 [\d.]+ ms, p90 [\d.]+ ms, p99 [\d.]+ ms/);
  assert.match(r.stdout, /peak RSS [\d.]+ MB under load \([\d.]+ MB with preloading\), store [\d.]+ MB on disk/);
  assert.not.match(r.stderr, /\r/);
});

test('on a terminal a progress line is drawn on stderr and cleared', async () => {
  const r = await runArgv(
    [
      '/usr/bin/python3',
      join('test', 'fixtures', 'pty-run.py'),
      ...keyServerCommand,
      'bench-http-fetch',
      '--requests',
      '200',
      '--preload-shares',
      '10',
    ],
    { PTY_SCRIPT: '[]', PTY_TIMEOUT: '40' },
    45_000,
  );
  const out = JSON.parse(r.stdout) as { output: string; status: number };
  assert.is(out.status, 0, out.output);
  assert.match(out.output, /\rbench-http-fetch: 0\/200 \(0%\)/);
  assert.match(out.output, /\r\x1b\[K/);
  assert.match(out.output, /bench-http-fetch: 200 requests, 0 errors/);
});

test('SIGINT ends a run with 130 and removes its temporary state folder and load generator', async () => {
  const tmp = tempDir('bench-tmp');
  try {
    const child = spawn(
      keyServerCommand[0]!,
      [...keyServerCommand.slice(1), 'bench-http-fetch', '--requests', '100000000', '--preload-shares', '10'],
      {
        env: { ...process.env, TMPDIR: tmp.path },
        stdio: ['ignore', 'ignore', 'pipe'],
      },
    );
    const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
    const folder = () => readdirSync(tmp.path).filter((n) => n.startsWith('stash-key-server-bench-'));
    const loadGenerators = () =>
      readdirSync('/proc')
        .filter((pid) => /^\d+$/.test(pid))
        .filter((pid) => {
          try {
            return readFileSync(`/proc/${pid}/stat`, 'utf8').split(' ')[3] === String(child.pid);
          } catch {
            return false;
          }
        });
    for (let i = 0; i < 300 && !(folder().length === 1 && loadGenerators().length === 1); i++)
      await new Promise((r) => setTimeout(r, 50));
    assert.is(folder().length, 1, 'the run has its temporary state folder');
    const generator = loadGenerators()[0]!;
    child.kill('SIGINT');
    assert.is(await exited, 130);
    assert.equal(folder(), [], 'the temporary state folder is gone');
    for (let i = 0; i < 100 && existsSync(`/proc/${generator}`); i++) await new Promise((r) => setTimeout(r, 50));
    assert.not.ok(existsSync(`/proc/${generator}`), 'the load generator has exited');
  } finally {
    tmp.remove();
  }
});

test('bad options are usage errors (exit 64) that name the option', async () => {
  const cases: Array<[string[], RegExp]> = [
    [['bench-http', '--requests', '0'], /--requests/],
    [['bench-store', '--bogus'], /unknown option: --bogus/],
    [['bench-http-fetch', '--concurrency', 'x'], /--concurrency/],
    [['bench-http', '--payload-bytes', '5000'], /--payload-bytes 5000 is above the server's request body limit/],
    [['run', '--json'], /--json is not accepted by `run`/],
  ];
  for (const [args, message] of cases) {
    const r = await keyServer(args);
    assert.is(r.code, 64, `${args.join(' ')}: ${r.stderr}`);
    assert.match(r.stderr, message);
    assert.is(r.stdout, '');
  }
});

test('histogram percentiles are within 2% of the exact ones', () => {
  const h = new LatencyHistogram();
  for (let us = 1; us <= 10_000; us++) h.record(us);
  for (const p of [50, 90, 99]) {
    const exact = (p / 100) * 10_000;
    assert.ok(Math.abs(h.percentile(p) - exact) / exact < 0.02, `p${p}: ${h.percentile(p)} vs ${exact}`);
  }
  const merged = LatencyHistogram.fromData(h.toData());
  merged.merge(h.toData());
  assert.is(merged.count, 20_000);
  assert.is(merged.percentile(50), h.percentile(50));
});

// The scripts record their figures here, and run-all.js's test below prints the targets from them
// rather than running keyserver-publish.js and keyserver-flow.js a second time.
const summary = tempDir('bench-summary');
test.after(() => summary.remove());

for (const script of SCRIPTS) {
  test(`bench/${script} in quick mode prints a markdown table`, async () => {
    // A bound, not a speed: quick mode takes 5-20 s alone; keyserver-rss-process.js went past 45 s in a whole CI run.
    const r = await runArgv(
      [process.execPath, join('bench', script)],
      { BENCH_QUICK: '1', BENCH_SUMMARY: join(summary.path, 'targets.jsonl') },
      180_000,
    );
    assert.is(r.code, 0, r.stderr);
    const missing = /not measured: (.*)/.exec(r.stdout);
    if (missing && !needFacility(false, script, missing[1]!)) return;
    assert.match(r.stdout, /^### .+$/m);
    assert.match(r.stdout, /^\| --- (\| --- )+\|$/m);
    const rows = r.stdout.split('\n').filter((l) => l.startsWith('| ') && !l.startsWith('| ---'));
    assert.ok(rows.length >= 3, 'a header and two measured rows');
    const figures = rows.slice(1).map((row) =>
      row
        .split('|')
        .slice(2, -1)
        .map((c) => c.trim())
        .filter((c) => /^[\d,.]+$/.test(c))
        .map((c) => Number(c.replace(/,/g, ''))),
    );
    assert.ok(figures.flat().length >= 4, `figures in the table: ${rows.join(' / ')}`);
    // Each row with figures (not a second table's header) has a positive one. One cell may round to zero: a ratio
    // of two rates measured for a second each under a whole CI run's load ("0.00" failed a run, 2026-11-27).
    assert.ok(
      figures.every(
        (row) => row.every((n) => Number.isFinite(n) && n >= 0) && (row.length === 0 || row.some((n) => n > 0)),
      ),
      `a measured row with no positive figure: ${rows.join(' / ')}`,
    );
    assert.match(r.stdout, /command: `/);
  });
}

test('bench/run-all.js goes on past a failed script and ends with the targets table, each figure beside its baseline', async () => {
  // The figures of publishes and flows are those the scripts above recorded in the same BENCH_SUMMARY file.
  const r = await runArgv(
    [process.execPath, join('bench', 'run-all.js'), 'no-such-script.js', 'inject-scaling.js'],
    { BENCH_QUICK: '1', BENCH_SUMMARY: join(summary.path, 'targets.jsonl') },
    120_000,
  );
  assert.is(r.code, 1, 'a failed script fails the run');
  assert.match(r.stdout, /bench\/no-such-script\.js failed \(1\); going on with the next script/);
  const table = r.stdout.slice(r.stdout.indexOf('### Targets'));
  const rows = table.split('\n').filter((l) => l.startsWith('| ') && !l.startsWith('| ---'));
  assert.is(rows.length, 8, 'a header and the seven figures of the table');
  const flows = rows
    .find((l) => l.startsWith('| flows/s'))!
    .split('|')
    .map((c) => c.trim());
  assert.match(flows[2]!, /^\d+\.\d\d \([\d,]+ x 3\/s; rounds /);
  // The baseline is loaded by wrk where it is installed: the lean client cannot out-run bare node:http.
  const wrk = haveCommand('wrk');
  if (!wrk && strict)
    throw new Error('wrk is missing: the baselines of publishes and flows fell back to the lean client');
  assert.match(
    flows[3]!,
    wrk ? /^bare node:http [\d,]+ req\/s by wrk$/ : /^bare node:http [\d,]+ req\/s by the lean client$/,
  );
  assert.is(flows[4], '>= 0.35');
  assert.match(flows[5]!, /^(met|not met)$/);
  assert.match(flows[6]!, /bench-http-flow --json --requests 100/);
  assert.match(flows[7]!, /UTC, load [\d.]+ [\d.]+ [\d.]+$/);
  assert.match(rows.find((l) => l.startsWith('| publishes/s'))!, /bench-http --json/);
  assert.match(rows.find((l) => l.startsWith('| RSS'))!, /keyserver-rss-process|\| not measured \|/);
  for (const row of rows.slice(1)) {
    const cells = row.split('|').map((c) => c.trim());
    if (cells[2] === 'not measured') assert.equal(cells.slice(3, -1), ['-', '-', '-', '-', '-'], row);
  }
  assert.match(r.stdout, /failed: no-such-script\.js \(1\)/);
});

test.run();
