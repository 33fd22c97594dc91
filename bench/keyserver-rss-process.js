// The key server's resident memory as an operator sees it: the real
// `stash_key_server run` process, restarted over a store of 100,000 live
// shares (recovered from its log), under fetch and publish load from two
// separate load generators at once. The RSS is the kernel's exact figure
// (/proc/PID/smaps_rollup), sampled every 50 ms during the load, summed over
// the server's processes. Rows: the server with node's defaults; the
// installed service run exactly as the unit `stash_key_server install`
// writes runs it (its ExecStart= arguments, `--processes auto` included, and
// its Environment=; the paths it names point into a temporary folder; issue
// 30's target row); the same while the store compacts during the load; the
// same with `--processes 2`. Baseline in the same run: the same server over
// an empty store, idle.
//   node bench/keyserver-rss-process.js          (BENCH_QUICK=1 for a tiny run; Linux only)
import { spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { bin, conditions, dist, fmt, quick, recordTarget, report } from './lib.js';

const { preloadShares } = await import(dist('keyserver/bench/bench-server.js'));
const { runLoadProcess } = await import(dist('keyserver/bench/load-driver.js'));
const { benchPublicKey } = await import(dist('keyserver/bench/requests.js'));
const { ShareStore } = await import(dist('keyserver/store/share-store.js'));
const { defaultConfig } = await import(dist('keyserver/cli/options.js'));
const { UNIT_ENVIRONMENT, unitText } = await import(dist('keyserver/install/unit.js'));
const { realPaths } = await import(dist('keyserver/install/paths.js'));

const SHARES = quick ? 2000 : 100000;
const REQUESTS = quick ? 2000 : 50000;
/** Publishes sent while the fetches run (each a durable write and a line in the log). */
const PUBLISHES = quick ? 200 : 10000;
const TTL = 30 * 24 * 3600;

const memOf = (pid) => {
  const text = readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8');
  const kb = (name) => Number(new RegExp(`^${name}:\\s+(\\d+) kB`, 'm').exec(text)[1]) * 1024;
  return { rss: kb('Rss'), uss: kb('Private_Clean') + kb('Private_Dirty') };
};
const childPids = (pid) =>
  readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
/** RSS and private memory of the server: its process and its fetch processes, added up. */
const serverMem = (pid) =>
  [pid, ...childPids(pid)]
    .map(memOf)
    .reduce((a, m) => ({ rss: a.rss + m.rss, uss: a.uss + m.uss }), { rss: 0, uss: 0 });
/** A loopback port free at this moment (the kernel picks it). */
const freePort = () =>
  new Promise((resolve, reject) => {
    const s = createServer()
      .once('error', reject)
      .listen(0, '127.0.0.1', () => {
        const { port } = s.address();
        s.close(() => resolve(port));
      });
  });
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const quiet = { info() {}, warn: (m) => process.stderr.write(`${m}\n`), error: (m) => process.stderr.write(`${m}\n`) };

/**
 * The installed unit's ExecStart= after the script (`run --processes auto
 * --config ... --log-file ... --replication-token-file ...`), with the
 * files it names in `work`, and a config there that an operator would edit:
 * this state folder, a loopback port, request and mail limits off (the load
 * comes from one address). Checks that the unit's Environment= is the one
 * this script runs with.
 */
function unitArgs(work, dir, port) {
  const unit = unitText({ node: process.execPath, script: bin('stash_key_server.js') });
  const exec = /^ExecStart=(.*)$/m.exec(unit)[1];
  if (exec.includes('"')) throw new Error(`a quoted ExecStart= word: ${exec}`);
  const env = Object.entries(UNIT_ENVIRONMENT)
    .map(([k, v]) => (v.includes(' ') ? `"${k}=${v}"` : `${k}=${v}`))
    .join(' ');
  if (!unit.includes(`\nEnvironment=${env}\n`)) throw new Error(`the unit's Environment= is not ${env}`);
  const files = {
    [realPaths.config]: join(work, `config-${port}.toml`),
    [realPaths.log]: join(work, `server-${port}.log`),
    '%d/replication-token': join(work, 'replication-token'),
  };
  writeFileSync(
    files[realPaths.config],
    [
      `bind_addr = "127.0.0.1:${port}"`,
      `state_dir = "${dir}"`,
      'rate_limit_per_minute = 0',
      'verification_email_rate_limit_per_hour = 0',
      'verification_email_ip_rate_limit_per_hour = 0',
      `share_ttl = ${TTL}`,
      '',
    ].join('\n'),
  );
  writeFileSync(files['%d/replication-token'], `${'a1'.repeat(32)}\n`, { mode: 0o600 });
  const words = exec.split(' ');
  return words.slice(words.indexOf('run') + 1).map((w) => files[w] ?? w);
}

/**
 * `unit`: run with the installed unit's arguments (unitArgs) instead of plain
 * options; `extra` is added either way, but `--processes N` first in `extra`
 * takes the place of the unit's `auto`.
 */
async function startServer(dir, flags, env, extra = [], unit = false) {
  const port = await freePort();
  const args = unit
    ? unitArgs(work, dir, port)
    : [
        '--state-dir',
        dir,
        '--bind',
        `127.0.0.1:${port}`,
        '--rate-limit-per-minute',
        '0',
        '--verification-email-rate-limit-per-hour',
        '0',
        '--verification-email-ip-rate-limit-per-hour',
        '0',
        '--share-ttl',
        String(TTL),
      ];
  let own = extra;
  if (unit && extra[0] === '--processes') {
    args.splice(args.indexOf('--processes'), 2, ...extra.slice(0, 2));
    own = extra.slice(2);
  }
  const child = spawn(process.execPath, [...flags, bin('stash_key_server.js'), 'run', ...args, ...own], {
    stdio: ['ignore', 'ignore', 'pipe'],
    env: { ...process.env, ...env },
  });
  let err = '';
  child.stderr.on('data', (d) => {
    err += d;
  });
  const url = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 300; i++) {
    if (child.exitCode !== null) throw new Error(`server exited: ${err.slice(-2000)}`);
    try {
      if ((await fetch(`${url}/v1/status`)).ok) {
        // With --processes N, once its fetch processes are up.
        const want = extra.includes('--processes') ? Number(extra[extra.indexOf('--processes') + 1]) - 1 : 0;
        while (childPids(child.pid).length < want) await sleep(50);
        const logFile = unit ? join(work, `server-${port}.log`) : undefined;
        // The unit's --log-file rotates at 1/50 of the disk cap: the line looked for may be in an older file.
        const logText = () =>
          [`${logFile}.2`, `${logFile}.1`, logFile]
            .filter((f) => existsSync(f))
            .map((f) => readFileSync(f, 'utf8'))
            .join('');
        return { child, url, log: () => err + (logFile ? logText() : '') };
      }
    } catch {
      /* not listening yet */
    }
    await sleep(100);
  }
  child.kill();
  throw new Error('server did not answer within 30 s');
}

const stop = (child) =>
  new Promise((resolve) => {
    child.once('close', resolve);
    child.kill();
  });

const work = mkdtempSync(join(tmpdir(), 'stash-rss-'));
try {
  const empty = join(work, 'empty');
  const full = join(work, 'full');
  const keys = Array.from({ length: 16 }, benchPublicKey);
  const store = await ShareStore.open({
    dir: full,
    serverId: 0,
    originEpoch: Date.now(),
    compactMinBytes: 1 << 30,
    clock: { now: () => Date.now() },
    logger: quiet,
  });
  const codes = await preloadShares(store, { ...defaultConfig(), shareTtlSeconds: TTL }, SHARES, keys);
  await store.close();

  const rows = [];
  // The last row compacts the store while the load runs: a compaction threshold below the log's size
  // makes the first batch of fetch counts start one (the server logs "store: compacted" when it is done).
  const compactNow = ['--compact-min-bytes', '4096'];
  const two = ['--processes', '2'];
  const perProcess = [];
  const installed = 'the installed unit (run --processes auto, its Environment=)';
  let target;
  for (const [name, flags, env, extra, unit] of [
    ['node defaults, one process', [], {}, [], false],
    [installed, [], UNIT_ENVIRONMENT, [], true],
    ['the installed unit, compacting during the load', [], UNIT_ENVIRONMENT, compactNow, true],
    ['the installed unit with --processes 2 (total of both)', [], UNIT_ENVIRONMENT, two, true],
  ]) {
    const processes = extra === two ? two : [];
    const idle = await startServer(empty, flags, env, processes, unit);
    await sleep(quick ? 200 : 1000);
    const baseline = serverMem(idle.child.pid);
    await stop(idle.child);
    // Each row over the same 100,000 shares: a fresh copy of the store, not the one the rows before
    // have published into (10,000 pending shares a row: the fourth row reached the default disk cap's
    // publish limit, 26 MB of store.log, and its publishes were refused with 507).
    const rowStore = join(work, `row-${rows.length}`);
    cpSync(full, rowStore, { recursive: true });
    const { child, url, log } = await startServer(rowStore, flags, env, extra, unit);
    const serving = 1 + childPids(child.pid).length;
    await sleep(quick ? 200 : 1000);
    const started = serverMem(child.pid);
    let peak = { rss: 0, uss: 0 };
    const each = new Map();
    const sample = () => {
      try {
        const m = serverMem(child.pid);
        peak = { rss: Math.max(peak.rss, m.rss), uss: Math.max(peak.uss, m.uss) };
        for (const pid of [child.pid, ...childPids(child.pid)])
          each.set(pid, Math.max(each.get(pid) ?? 0, memOf(pid).rss));
      } catch {
        /* exited */
      }
    };
    const timer = setInterval(sample, 50);
    const load = (mode, total, concurrency) =>
      runLoadProcess({
        mode,
        url,
        total,
        concurrency,
        payloadBytes: 0,
        keys: keys.map((k) => k.toString('base64')),
        codes: mode === 'fetch' ? codes : [],
        progress: false,
        cpu: undefined,
        client: 'raw',
      });
    const [summary, published] = await Promise.all([load('fetch', REQUESTS, 64), load('publish', PUBLISHES, 16)]);
    // A short (quick) load can end before the compaction does: keep sampling until it has finished.
    for (let i = 0; extra === compactNow && !/store: compacted/.test(log()) && i < 300; i++) await sleep(50);
    clearInterval(timer);
    sample();
    const compacted = /store: compacted/.test(log());
    await stop(child);
    rmSync(rowStore, { recursive: true, force: true });
    if (summary.errors > 0) throw new Error(`${name}: ${summary.errors} fetch(es) failed: ${summary.firstError}`);
    if (published.errors > 0)
      throw new Error(`${name}: ${published.errors} publish(es) failed: ${published.firstError}`);
    if (extra === compactNow && !compacted)
      throw new Error(`${name}: the server did not compact during the load; its log ends:\n${log().slice(-1500)}`);
    rows.push([
      name,
      String(serving),
      fmt.mb(baseline.rss),
      fmt.mb(started.rss),
      fmt.mb(peak.rss),
      fmt.mb(peak.uss),
      fmt.int(summary.requests / summary.seconds),
      fmt.int(published.requests / published.seconds),
      peak.rss < 100 * 1048576 ? 'met' : 'not met',
    ]);
    if (name === installed) target = { peak, baseline, serving };
    if (each.size > 1)
      perProcess.push(
        `${name}: peak RSS of each process ${[...each.values()].map(fmt.mb).join(' MB (store process), ')} MB (fetch process)`,
      );
  }
  report(
    `Key server process RSS, ${fmt.int(SHARES)} live shares, ${fmt.int(REQUESTS)} fetches and ${fmt.int(PUBLISHES)} publishes at once`,
    [
      'settings',
      'processes',
      'empty store, idle MB',
      `${fmt.int(SHARES)} shares, 1 s after start MB`,
      'peak RSS under load MB',
      'peak private MB',
      'fetches/s (every one answered)',
      'publishes/s (every one answered)',
      'target < 100 MB (RSS)',
    ],
    rows,
    [
      "command: `node bench/keyserver-rss-process.js` (the real `stash_key_server run` in its own process, its store written beforehand and recovered at start; RSS and private memory (Private_Clean + Private_Dirty) from /proc/PID/smaps_rollup every 50 ms, summed over the store's process and its fetch processes; MB = 2^20 bytes)",
      `the installed unit: \`${process.execPath} ${bin('stash_key_server.js')} run ${unitArgs(work, '<state>', '<port>').join(' ')}\` (the unit's ExecStart=, its files in a temporary folder; the config: loopback port, state folder, request and mail limits off) with exactly the unit's Environment=: ${Object.entries(
        UNIT_ENVIRONMENT,
      )
        .map(([k, v]) => (v.includes(' ') ? `${k}='${v}'` : `${k}=${v}`))
        .join(' ')}`,
      'load: two load generators at once, fetches (64 in flight) and binary publishes (16 in flight), no verification mail command (the link is logged); unpinned: they share the two CPUs with the server',
      ...perProcess,
      `conditions: ${conditions()}`,
    ],
  );
  recordTarget({
    figure: 'rss',
    value: `${fmt.mb(target.peak.rss)} MB peak (${target.serving} process${target.serving > 1 ? 'es' : ''}, as --processes auto picks here)`,
    baseline: `idle over an empty store ${fmt.mb(target.baseline.rss)} MB`,
    target: '< 100 MB',
    met: target.peak.rss < 100 * 1048576,
    command: 'node bench/keyserver-rss-process.js',
  });
} finally {
  rmSync(work, { recursive: true, force: true });
}
