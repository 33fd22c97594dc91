// The key server's resident memory as an operator sees it: the real
// `stash_key_server run` process, restarted over a store of 100,000 live
// shares (recovered from its log), under fetch load from a separate load
// generator. The RSS is the kernel's exact figure (/proc/PID/smaps_rollup),
// sampled every 50 ms during the load. Rows: the server with node's defaults,
// then with the memory settings of the installed service (`stash_key_server
// install` writes them into the unit; docs/operations.md, "Memory"), then the
// same while the server compacts its store during the load. Baseline in
// the same run: the same server over an empty store, idle.
//   node bench/keyserver-rss-process.js          (BENCH_QUICK=1 for a tiny run; Linux only)
import { spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { bin, conditions, dist, fmt, quick, report } from './lib.js';

const { preloadShares } = await import(dist('keyserver/bench/bench-server.js'));
const { runLoadProcess } = await import(dist('keyserver/bench/load-driver.js'));
const { benchPublicKey } = await import(dist('keyserver/bench/requests.js'));
const { ShareStore } = await import(dist('keyserver/store/share-store.js'));
const { defaultConfig } = await import(dist('keyserver/cli/options.js'));
const { UNIT_ENVIRONMENT } = await import(dist('keyserver/install/unit.js'));

const SHARES = quick ? 2000 : 100000;
const REQUESTS = quick ? 2000 : 50000;
const TTL = 30 * 24 * 3600;

const memOf = (pid) => {
  const text = readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8');
  const kb = (name) => Number(new RegExp(`^${name}:\\s+(\\d+) kB`, 'm').exec(text)[1]) * 1024;
  return { rss: kb('Rss'), uss: kb('Private_Clean') + kb('Private_Dirty') };
};
const childPids = (pid) => readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
/** RSS and private memory of the server: its process and its fetch processes, added up. */
const serverMem = (pid) => [pid, ...childPids(pid)].map(memOf).reduce((a, m) => ({ rss: a.rss + m.rss, uss: a.uss + m.uss }), { rss: 0, uss: 0 });
/** A loopback port free at this moment (the kernel picks it). */
const freePort = () => new Promise((resolve, reject) => {
  const s = createServer().once('error', reject).listen(0, '127.0.0.1', () => { const { port } = s.address(); s.close(() => resolve(port)); });
});
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const quiet = { info() {}, warn: (m) => process.stderr.write(`${m}\n`), error: (m) => process.stderr.write(`${m}\n`) };

async function startServer(dir, flags, env, extra = []) {
  const port = await freePort();
  const child = spawn(process.execPath, [...flags, bin('stash_key_server.js'), 'run', '--state-dir', dir, '--bind', `127.0.0.1:${port}`,
    '--rate-limit-per-minute', '0', '--share-ttl', String(TTL), ...extra], { stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, ...env } });
  let err = '';
  child.stderr.on('data', (d) => { err += d; });
  const url = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 300; i++) {
    if (child.exitCode !== null) throw new Error(`server exited: ${err.slice(-2000)}`);
    try {
      if ((await fetch(`${url}/v1/status`)).ok) {
        // With --processes N, once its fetch processes are up.
        const want = extra.includes('--processes') ? Number(extra[extra.indexOf('--processes') + 1]) - 1 : 0;
        while (childPids(child.pid).length < want) await sleep(50);
        return { child, url, log: () => err };
      }
    } catch { /* not listening yet */ }
    await sleep(100);
  }
  child.kill();
  throw new Error('server did not answer within 30 s');
}

const stop = (child) => new Promise((resolve) => { child.once('close', resolve); child.kill(); });

const work = mkdtempSync(join(tmpdir(), 'stash-rss-'));
try {
  const empty = join(work, 'empty');
  const full = join(work, 'full');
  const keys = Array.from({ length: 16 }, benchPublicKey);
  const store = await ShareStore.open({ dir: full, serverId: 0, originEpoch: Date.now(), compactMinBytes: 1 << 30, clock: { now: () => Date.now() }, logger: quiet });
  const codes = await preloadShares(store, { ...defaultConfig(), shareTtlSeconds: TTL }, SHARES, keys);
  await store.close();

  const rows = [];
  // The last row compacts the store while the load runs: a compaction threshold below the log's size
  // makes the first batch of fetch counts start one (the server logs "store: compacted" when it is done).
  const compactNow = ['--compact-min-bytes', '4096'];
  const two = ['--processes', '2'];
  const perProcess = [];
  for (const [name, flags, env, extra] of [
    ['node defaults', [], {}, []],
    ['installed service settings', [], UNIT_ENVIRONMENT, []],
    ['installed service settings, compacting during the load', [], UNIT_ENVIRONMENT, compactNow],
    ['installed service settings, two processes (total of both)', [], UNIT_ENVIRONMENT, two],
  ]) {
    const processes = extra === two ? two : [];
    const idle = await startServer(empty, flags, env, processes);
    await sleep(quick ? 200 : 1000);
    const baseline = serverMem(idle.child.pid);
    await stop(idle.child);
    const { child, url, log } = await startServer(full, flags, env, extra);
    await sleep(quick ? 200 : 1000);
    const started = serverMem(child.pid);
    let peak = { rss: 0, uss: 0 };
    const each = new Map();
    const sample = () => {
      try {
        const m = serverMem(child.pid);
        peak = { rss: Math.max(peak.rss, m.rss), uss: Math.max(peak.uss, m.uss) };
        for (const pid of [child.pid, ...childPids(child.pid)]) each.set(pid, Math.max(each.get(pid) ?? 0, memOf(pid).rss));
      } catch { /* exited */ }
    };
    const timer = setInterval(sample, 50);
    const summary = await runLoadProcess({ mode: 'fetch', url, total: REQUESTS, concurrency: 64, payloadBytes: 0,
      keys: keys.map((k) => k.toString('base64')), codes, progress: false, cpu: undefined, client: 'raw' });
    // A short (quick) load can end before the compaction does: keep sampling until it has finished.
    for (let i = 0; extra === compactNow && !/store: compacted/.test(log()) && i < 300; i++) await sleep(50);
    clearInterval(timer);
    sample();
    const compacted = /store: compacted/.test(log());
    await stop(child);
    if (summary.errors > 0) throw new Error(`${name}: ${summary.errors} fetch(es) failed: ${summary.firstError}`);
    if (extra === compactNow && !compacted) throw new Error(`${name}: the server did not compact during the load`);
    rows.push([name, fmt.mb(baseline.rss), fmt.mb(started.rss), fmt.mb(peak.rss), fmt.mb(peak.uss), fmt.int(summary.requests / summary.seconds),
      peak.rss < 100 * 1048576 ? 'met' : 'not met']);
    if (each.size > 1) perProcess.push(`${name}: peak RSS of each process ${[...each.values()].map(fmt.mb).join(' MB (store process), ')} MB (fetch process)`);
  }
  report(`Key server process RSS, ${fmt.int(SHARES)} live shares, ${fmt.int(REQUESTS)} fetches`,
    ['settings', 'empty store, idle MB', `${fmt.int(SHARES)} shares, 1 s after start MB`, 'peak RSS under fetch load MB', 'peak private MB', 'fetches/s (every fetch answered)', 'target < 100 MB (RSS)'],
    rows,
    [
      'command: `node bench/keyserver-rss-process.js` (the real `stash_key_server run` in its own process, its store written beforehand and recovered at start; RSS and private memory (Private_Clean + Private_Dirty) from /proc/PID/smaps_rollup every 50 ms, summed over the store\'s process and its fetch processes; MB = 2^20 bytes)',
      `installed service settings: the environment ${Object.entries(UNIT_ENVIRONMENT).map(([k, v]) => (v.includes(' ') ? `${k}='${v}'` : `${k}=${v}`)).join(' ')} (the unit's Environment= lines, written by \`stash_key_server install\`; docs/operations.md, "Memory")`,
      'unpinned: the load generator shares the two CPUs with the server',
      ...perProcess,
      `conditions: ${conditions()}`,
    ]);
} finally {
  rmSync(work, { recursive: true, force: true });
}
