// The key server's peak resident memory as an operator sees it, phase by
// phase: the installed service (the single executable, run with the unit's
// ExecStart= words, `--processes auto` included, and exactly its
// Environment=; the paths it names point into a temporary folder) takes
// 100,000 publishes (100,000 pending shares), then confirms all 100,000
// links, then answers fetches of them under a publish load from a second
// load generator. One word is added to the unit's: `--developer`, so that
// the links are printed on stdout (the bench reads them there) rather than
// handed to a mail command, a fork and exec per publish that this machine
// runs 35-90 times a second (100,000 would take half an hour); it also puts
// the state in a fresh temporary folder, and changes nothing else. For each phase the
// peak is VmHWM of /proc/PID/status, added up over the server's processes
// (the store's process and any fetch process), its
// high-water mark reset (/proc/PID/clear_refs) when the phase begins. Target:
// under 100 MiB in every phase. Baseline in the same run: the
// same server over an empty store, idle.
//   node bench/keyserver-rss-process.js          (BENCH_QUICK=1 for a tiny run from dist/; Linux only)
// The single executable is built into a temporary folder first (about 15 s;
// scripts/release/sea.js); BENCH_SEA=PATH runs one built before, and where none
// can be built the script says so and runs `node bin/stash_key_server.js` the
// way the unit would (same words, same NODE_OPTIONS and allocator settings).
// BENCH_PROCESSES=2 measures `--processes 2` instead of the unit's `auto`.
import { spawn, spawnSync } from 'node:child_process';
import { createServer } from 'node:net';
import { closeSync, existsSync, fsyncSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { bin, conditions, dist, fmt, quick, recordTarget, report, root } from './lib.js';

const { runLoadProcess } = await import(dist('keyserver/bench/load-driver.js'));
const { benchPublicKey } = await import(dist('keyserver/bench/requests.js'));
const { UNIT_ENVIRONMENT, unitText } = await import(dist('keyserver/install/unit.js'));
const { realPaths } = await import(dist('keyserver/install/paths.js'));

const SHARES = quick ? 2000 : 100000;
const FETCHES = quick ? 2000 : 50000;
/** Publishes sent while the fetches run (each a durable write, a printed link and a line in the log). */
const PUBLISHES = quick ? 200 : 10000;
const TTL = 30 * 24 * 3600;
/** BENCH_PROCESSES=N: `--processes N` in place of the unit's `auto` (N - 1 fetch processes, each with its copy of the shares). */
const PROCESSES = process.env.BENCH_PROCESSES;
const MiB = 1048576;
const TARGET = 100 * MiB;

/** A figure of /proc/PID/status (VmHWM, VmRSS) in bytes. */
const status = (pid, name) =>
  Number(new RegExp(`^${name}:\\s+(\\d+) kB`, 'm').exec(readFileSync(`/proc/${pid}/status`, 'utf8'))[1]) * 1024;
const childPids = (pid) =>
  readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
/**
 * The server's processes: the store's process and its fetch processes. Any
 * other child (a mail command) is left out: between fork and exec it is a
 * copy of the server and would count the server's memory twice.
 */
const serverPids = (pid) => [
  pid,
  ...childPids(pid).filter((c) => {
    try {
      return readFileSync(`/proc/${c}/cmdline`, 'utf8').includes('__fetch-process');
    } catch {
      return false; // ended meanwhile
    }
  }),
];
const sum = (pids, name) => pids.reduce((total, pid) => total + status(pid, name), 0);
/** Resets each process's peak RSS to its RSS now ("5" to clear_refs, Linux 4.0+). */
const resetPeaks = (pids) => {
  for (const pid of pids) writeFileSync(`/proc/${pid}/clear_refs`, '5');
};
/**
 * Drops a built executable's pages from the page cache, as after a boot.
 * Fresh from the build (strip and postject write it whole) they sit in the
 * cache in large folios, and every page the server touches then maps a
 * larger piece of the file: 45-49 MB of the executable resident instead of
 * 35-39, measured here.
 */
function dropFromPageCache(file) {
  const fd = openSync(file, 'r');
  try {
    fsyncSync(fd); // only clean pages can be dropped
  } finally {
    closeSync(fd);
  }
  spawnSync('dd', [`if=${file}`, 'iflag=nocache', 'count=0'], { stdio: 'ignore' });
}

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

/**
 * What runs the server: the single executable (BENCH_SEA, or built now), or
 * node and bin/stash_key_server.js in quick mode or when no executable can be built.
 */
async function serverProgram(work) {
  if (process.env.BENCH_SEA)
    return { argv: [process.env.BENCH_SEA], what: `the single executable ${process.env.BENCH_SEA}` };
  const npm = { argv: [process.execPath, bin('stash_key_server.js')], what: '`node bin/stash_key_server.js` (dist/)' };
  if (quick) return npm;
  try {
    const { buildSingleExecutables, SEA_TARGETS } = await import('../scripts/release/sea.js');
    const target = SEA_TARGETS.find((t) => t.name === `linux-${process.arch}`);
    if (!target) throw new Error(`no single executable for linux-${process.arch}`);
    const [built] = await buildSingleExecutables(root, { outDir: join(work, 'sea'), targets: [target.name] });
    return {
      argv: [built.path],
      what: `the single executable (${target.name}, scripts/release/sea.js, this checkout)`,
    };
  } catch (err) {
    process.stderr.write(`keyserver-rss-process: no single executable (${err.message}); measuring ${npm.what}\n`);
    return { ...npm, what: `${npm.what}: the single executable could not be built (${err.message})` };
  }
}

/**
 * The installed unit's ExecStart= after `run` (`--processes auto --config ...
 * --log-file ... --replication-token-file ...`) with the files it names in
 * `work`, and a config there that an operator would edit: this state folder,
 * a loopback port, request and mail limits off (the load comes from one
 * address). Checks that the unit's Environment= is the one this script runs with.
 */
function unitArgs(program, dir, port) {
  const unit = unitText(
    program.argv.length === 1 ? { executable: program.argv[0] } : { node: program.argv[0], script: program.argv[1] },
  );
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
  const args = words.slice(words.indexOf('run') + 1).map((w) => files[w] ?? w);
  if (PROCESSES) args[args.indexOf('--processes') + 1] = PROCESSES;
  return { args, log: files[realPaths.log] };
}

/**
 * Starts the server as the unit would, with systemd's small environment, and
 * `--developer`; resolves once it answers. `links` gets the path of every
 * verification link it prints.
 */
async function startServer(program, dir, links) {
  const port = await freePort();
  const { args, log } = unitArgs(program, dir, port);
  const cache = mkdtempSync(join(work, 'cache-'));
  if (program.argv.length === 1) dropFromPageCache(program.argv[0]);
  const child = spawn(program.argv[0], [...program.argv.slice(1), 'run', ...args, '--developer'], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { PATH: '/usr/local/bin:/usr/bin:/bin', LANG: 'C.UTF-8', CACHE_DIRECTORY: cache, ...UNIT_ENVIRONMENT },
  });
  let err = '';
  child.stderr.on('data', (d) => {
    err += d;
  });
  let partial = '';
  child.stdout.setEncoding('utf8').on('data', (d) => {
    const lines = (partial + d).split('\n');
    partial = lines.pop();
    for (const line of lines) {
      const link = /^verification link for \S+: https?:\/\/[^/]+(\/verify\/\S+)$/.exec(line);
      if (link) links.push(link[1]);
    }
  });
  // The unit's --log-file rotates at 1/50 of the disk cap: a line looked for may be in an older file.
  const logText = () =>
    err +
    [`${log}.2`, `${log}.1`, log]
      .filter((f) => existsSync(f))
      .map((f) => readFileSync(f, 'utf8'))
      .join('');
  const url = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 600; i++) {
    if (child.exitCode !== null) throw new Error(`server exited: ${logText().slice(-2000)}`);
    const up = await fetch(`${url}/v1/status`).then(
      (r) => r.ok,
      () => false,
    );
    // With --processes N, once its fetch processes are up too.
    if (up && serverPids(child.pid).length >= Number(PROCESSES ?? 1)) return { child, url, log: logText };
    await sleep(100);
  }
  child.kill();
  throw new Error('server did not answer within 60 s');
}

const stop = (child) =>
  new Promise((resolve) => {
    child.once('close', resolve);
    child.kill();
  });

const work = mkdtempSync(join(tmpdir(), 'stash-rss-'));
try {
  const program = await serverProgram(work);
  const links = [];
  const keys = Array.from({ length: 16 }, benchPublicKey).map((k) => k.toString('base64'));
  const load = (mode, total, concurrency, more = {}) =>
    runLoadProcess({
      mode,
      url: server.url,
      total,
      concurrency,
      payloadBytes: 0,
      keys,
      codes: [],
      progress: false,
      cpu: undefined,
      client: 'raw',
      ...more,
    });

  const server = await startServer(program, join(work, 'state'), links);
  const rows = [];
  const compactions = () => (server.log().match(/store: compacted/g) ?? []).length;
  /** Runs one phase, the peaks reset at its start unless `fromStart`; adds its row. */
  const phase = async (name, run, rate, fromStart = false) => {
    const pids = serverPids(server.child.pid);
    if (!fromStart) resetPeaks(pids);
    const before = compactions();
    const results = await run();
    for (const r of results)
      if (r.errors > 0)
        throw new Error(`${name}: ${r.errors} request(s) failed: ${r.firstError}\n${server.log().slice(-1500)}`);
    const peak = sum(pids, 'VmHWM');
    rows.push([
      name,
      String(pids.length),
      fmt.mb(peak),
      fmt.mb(sum(pids, 'VmRSS')),
      rate(results),
      String(compactions() - before),
      peak < TARGET ? 'met' : 'not met',
    ]);
    return { results, peak };
  };
  const perSecond = (r) => fmt.int(r.requests / r.seconds);

  await sleep(quick ? 200 : 1000);
  const idle = sum(serverPids(server.child.pid), 'VmHWM');
  rows.push([
    'started over an empty store, idle (baseline)',
    String(serverPids(server.child.pid).length),
    fmt.mb(idle),
    fmt.mb(sum(serverPids(server.child.pid), 'VmRSS')),
    '-',
    '0',
    '-',
  ]);
  // The publish phase's peak includes the start (its high-water mark is not reset).
  const publish = await phase(
    `publish ${fmt.int(SHARES)} (${fmt.int(SHARES)} pending at the end)`,
    async () => [await load('publish', SHARES, 16, { collectCodes: true })],
    ([r]) => `${perSecond(r)} publishes/s`,
    true,
  );
  // The last links may still be in the pipe.
  for (let i = 0; links.length < SHARES && i < 100; i++) await sleep(50);
  if (links.length !== SHARES) throw new Error(`${links.length} verification links printed for ${SHARES} publishes`);
  const paths = links.splice(0);
  const confirm = await phase(
    `confirm ${fmt.int(SHARES)}`,
    async () => [await load('confirm', SHARES, 16, { paths })],
    ([r]) => `${perSecond(r)} confirmations/s`,
  );
  const fetch = await phase(
    `fetch under load (${fmt.int(FETCHES)} fetches, ${fmt.int(PUBLISHES)} publishes at once)`,
    () =>
      Promise.all([load('fetch', FETCHES, 64, { codes: publish.results[0].codes }), load('publish', PUBLISHES, 16)]),
    ([f, p]) => `${perSecond(f)} fetches/s, ${perSecond(p)} publishes/s`,
  );
  await stop(server.child);
  const phases = [publish.peak, confirm.peak, fetch.peak];
  const highest = Math.max(...phases);
  report(
    `Key server peak memory by phase, ${fmt.int(SHARES)} shares, the installed unit${PROCESSES ? ` with --processes ${PROCESSES}` : ''}`,
    [
      'phase',
      'processes',
      'peak RSS (VmHWM, summed) MB',
      'RSS at the end MB',
      'rate (every request answered)',
      'compactions',
      'target < 100 MiB',
    ],
    rows,
    [
      `command: \`node bench/keyserver-rss-process.js\`; the server: ${program.what}`,
      `run as the unit runs it: \`${program.argv.join(' ')} run ${unitArgs(program, '<state>', '<port>').args.join(' ')} --developer\` (its ExecStart= words, the files in a temporary folder; the config: loopback port, state folder, request and mail limits off; \`--developer\` prints the links on stdout instead of running a mail command per publish) with exactly the unit's Environment=: ${Object.entries(
        UNIT_ENVIRONMENT,
      )
        .map(([k, v]) => (v.includes(' ') ? `${k}='${v}'` : `${k}=${v}`))
        .join(' ')}`,
      "peak: VmHWM from /proc/PID/status summed over the store's process and its fetch processes, reset through /proc/PID/clear_refs as each phase but the first begins (the publish phase includes the start); MB = 2^20 bytes",
      'load: binary publishes (16 in flight), POST /verify/<token> of every printed link (16 in flight), then fetches (64 in flight) and publishes (16 in flight) from two load generators at once; unpinned: they share the CPUs with the server',
      `conditions: ${conditions()}`,
    ],
  );
  recordTarget({
    figure: 'rss',
    value: `${fmt.mb(highest)} MB highest peak (publish ${fmt.mb(phases[0])}, confirm ${fmt.mb(phases[1])}, fetch ${fmt.mb(phases[2])})`,
    baseline: `idle over an empty store ${fmt.mb(idle)} MB`,
    target: '< 100 MiB in every phase',
    met: highest < TARGET,
    command: 'node bench/keyserver-rss-process.js',
  });
} finally {
  rmSync(work, { recursive: true, force: true });
}
