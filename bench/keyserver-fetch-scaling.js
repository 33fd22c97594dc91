// Fetches per second from two server processes over one store (`run
// --processes 2`: the store's process and a fetch process) against one
// (`run --processes 1`), the load from wrk in a process of its own, nothing
// pinned, interleaved rounds (measured; the target is the projection). Both servers run over the
// same preloaded store (a copy each: a store has one owner). Beside the
// throughput, the CPU time each side used per fetch: on a 2-CPU machine the
// load generator takes its share of the same two CPUs (docs/benchmarks.md,
// "Multi-core fetch").
//   node bench/keyserver-fetch-scaling.js   (BENCH_QUICK=1 for a tiny run; BENCH_ROUNDS=N, default 5)
import { copyFileSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import { conditions, fmt, quick, recordTarget, report } from './lib.js';
import { haveWrk, preloadedStore, runWrk, startKeyServer, wrkScript } from './wrk.js';

const TARGET = 1.6;
/** Issue 30: the projection from the CPU per fetch. */
const PROJECTION_TARGET = 1.8;

if (!haveWrk) {
  process.stdout.write('not measured: wrk is not installed (Debian: apt-get install wrk)\n');
  process.exit(0);
}

const rounds = Number(process.env.BENCH_ROUNDS ?? (quick ? 1 : 5));
const seconds = quick ? 1 : 5;
const threads = 2;
const connections = 64;
const { encodeShareRequest, BINARY_MEDIA_TYPE } = await import('../dist/keyserver/wire/messages.js');

/** CPU seconds (user + system) of a process (/proc/PID/stat), 0 once it is gone. */
function cpuOf(pid) {
  try {
    const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
    return (Number(f[11]) + Number(f[12])) / 100;
  } catch {
    return 0;
  }
}
/** CPU seconds of this process's children that were waited for (wrk, run by spawnSync). */
function childrenCpu() {
  const f = readFileSync('/proc/self/stat', 'utf8').split(') ')[1].split(' ');
  return (Number(f[13]) + Number(f[14])) / 100;
}
const childPids = (pid) =>
  readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);

const store = await preloadedStore(quick ? 10 : 1000);
const servers = [];
try {
  const copy = `${store.dir}-copy`;
  mkdirSync(copy, { mode: 0o700 });
  copyFileSync(join(store.dir, 'store.log'), join(copy, 'store.log'));
  const one = await startKeyServer({ dir: store.dir, extra: ['--processes', '1'] });
  servers.push(one);
  const two = await startKeyServer({ dir: copy, extra: ['--processes', '2'] });
  servers.push(two);
  for (let i = 0; i < 100 && childPids(two.child.pid).length === 0; i++) await new Promise((r) => setTimeout(r, 100));
  if (childPids(two.child.pid).length !== 1)
    throw new Error(`run --processes 2 has ${childPids(two.child.pid).length} fetch process(es), not 1:\n${two.log()}`);

  const script = wrkScript(store.dir, 'fetch', {
    path: '/v1/share',
    body: encodeShareRequest({ op: 'fetch', code: store.codes[0] }),
    headers: { 'Content-Type': BINARY_MEDIA_TYPE, Accept: BINARY_MEDIA_TYPE },
  });
  const measure = async (s) => {
    const pids = [s.child.pid, ...childPids(s.child.pid)];
    const before = pids.map(cpuOf);
    const wrkBefore = childrenCpu();
    const r = await runWrk({ url: s.url, script, seconds, threads, connections });
    if (r.errors > 0) throw new Error(`wrk saw ${r.errors} failed requests:\n${r.output}`);
    const serverCpu = pids.map((p, i) => cpuOf(p) - before[i]);
    return {
      ...r,
      serverUs: serverCpu.map((c) => (c / r.total) * 1e6),
      wrkUs: ((childrenCpu() - wrkBefore) / r.total) * 1e6,
    };
  };
  // Warm-up (not in quick mode, whose figures mean nothing).
  if (!quick) for (const s of [one, two]) await runWrk({ url: s.url, script, seconds: 1, threads, connections });
  const r = { one: [], two: [] };
  for (let i = 0; i < rounds; i++) {
    r.one.push(await measure(one));
    r.two.push(await measure(two));
  }
  const ratios = r.two.map((x, i) => x.rps / r.one[i].rps);
  const med = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  const row = (name, xs, ratio, target) => {
    const m = med(xs.map((x) => x.rps));
    const x = xs.find((y) => y.rps === m);
    return [
      name,
      fmt.int(m),
      `${fmt.int(Math.min(...xs.map((y) => y.rps)))}-${fmt.int(Math.max(...xs.map((y) => y.rps)))}`,
      fmt.ms(x.p50),
      fmt.ms(x.p99),
      x.serverUs.length > 1
        ? `${x.serverUs.map(fmt.us).join(' + ')} = ${fmt.us(x.serverUs.reduce((a, b) => a + b, 0))}`
        : fmt.us(x.serverUs[0]),
      fmt.us(x.wrkUs),
      ratio,
      target,
    ];
  };
  const ratio = med(ratios);
  // Issue 18's projection: each process on a CPU of its own, the load from elsewhere (fetches/s = CPUs / server CPU per fetch).
  const oneUs = med(r.one.map((x) => x.serverUs[0]));
  const twoUs = med(r.two.map((x) => x.serverUs.reduce((a, b) => a + b, 0)));
  const projected = 2 / twoUs / (1 / oneUs);
  report(
    'Fetch throughput, two server processes over one store vs one (wrk)',
    [
      'server',
      'fetches/s (median)',
      `range of ${rounds} rounds`,
      'p50 ms',
      'p99 ms',
      'server CPU us per fetch',
      'wrk CPU us per fetch',
      `ratio (target >= ${TARGET})`,
      'target',
    ],
    [
      row('stash_key_server run --processes 1', r.one, '1.00', '-'),
      row(
        'stash_key_server run --processes 2 (store process + fetch process)',
        r.two,
        fmt.ratio(ratio),
        ratio >= TARGET ? 'met' : 'not met',
      ),
    ],
    [
      `command: \`node bench/keyserver-fetch-scaling.js\`: the real \`stash_key_server run\` over ${fmt.int(store.codes.length)} preloaded verified shares (request limits off), every fetch of one live share, binary`,
      `load: \`wrk -t ${threads} -c ${connections} -d ${seconds}s\` in its own process, ${rounds} interleaved round(s) (BENCH_ROUNDS) ${quick ? 'without warm-up (quick mode);' : 'after a 1 s warm-up of each;'} nothing pinned: the servers and wrk share the machine's ${availableParallelism()} CPUs`,
      `ratio round by round: ${ratios.map(fmt.ratio).join(', ')} (the ratio column is their median)`,
      "CPU per fetch: user + system time of each server process (the store's process first) and of wrk, each divided by all the fetches of the round (so the server's figures add up to its CPU per fetch)",
      `projection (target >= ${PROJECTION_TARGET}): 2 CPUs / ${fmt.us(twoUs)} us against 1 CPU / ${fmt.us(oneUs)} us (medians of the rounds' server CPU per fetch) = ${fmt.ratio(projected)} x, ${projected >= PROJECTION_TARGET ? 'met' : 'not met'}`,
      `conditions: ${conditions()}`,
    ],
  );
  recordTarget({
    figure: 'cpu-scaling',
    value: `${fmt.ratio(projected)} x projected (${fmt.us(twoUs)} us per fetch for two, ${fmt.ratio(ratio)} x measured)`,
    baseline: `--processes 1: ${fmt.us(oneUs)} us per fetch`,
    target: `>= ${PROJECTION_TARGET}`,
    met: projected >= PROJECTION_TARGET,
    command: 'node bench/keyserver-fetch-scaling.js',
  });
} finally {
  for (const s of servers) await s.stop();
  rmSync(`${store.dir}-copy`, { recursive: true, force: true });
  store.remove();
}
