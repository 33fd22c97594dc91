// How far fetches could scale across the cores of this machine: one key
// server process, then two independent ones at the same time (each with its
// own store, preloaded shares and load generator, no coordination at all).
// The sum of the two is an upper bound for any multi-process design over one
// store (docs/benchmarks.md, "Multi-core fetch"); the target is 20,000/s.
//   node bench/keyserver-fetch-scaling.js   (BENCH_QUICK=1 for a tiny run)
import { bin, conditions, fmt, quick, report, run } from './lib.js';

const N = quick ? 300 : 50000;
const argv = [process.execPath, bin('stash_key_server.js'), 'bench-http-fetch', '--json', '--requests', String(N), '--payload-bytes', '0'];
const fetchRun = async () => JSON.parse((await run(argv)).trim().split('\n').pop());

const one = await fetchRun();
const two = await Promise.all([fetchRun(), fetchRun()]);
for (const r of [one, ...two]) if (r.errors > 0) throw new Error(`bench-http-fetch: ${r.errors} errors`);
const sum = two[0].requests_per_second + two[1].requests_per_second;
report('Fetch scaling over processes (upper bound)', ['processes', 'fetches/s', 'p50 ms', 'p99 ms', 'to 20,000/s target'], [
  ['1 key server + its load generator', fmt.int(one.requests_per_second), fmt.ms(one.latency_ms.p50), fmt.ms(one.latency_ms.p99), fmt.ratio(one.requests_per_second / 20000)],
  ['2 independent key servers + 2 load generators (sum)', fmt.int(sum), fmt.ms(Math.max(two[0].latency_ms.p50, two[1].latency_ms.p50)), fmt.ms(Math.max(two[0].latency_ms.p99, two[1].latency_ms.p99)), fmt.ratio(sum / 20000)],
], [
  `command: \`node bench/keyserver-fetch-scaling.js\` (runs \`stash_key_server bench-http-fetch --json --requests ${N} --payload-bytes 0\` once, then twice at the same time; unpinned; the load generators share the same cores)`,
  'the two runs overlap for most of their timed phase; their throughputs are added',
  `conditions: ${conditions()}`,
]);
