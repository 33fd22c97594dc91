// Where the key server's resident memory goes with 100,000 live shares under
// fetch load: process.memoryUsage() at each stage of a bench-http-fetch run
// (server started, shares preloaded, after a full GC, the peak sampled during
// the load, after the load and a GC), then the RSS split by mapping from
// /proc/self/smaps (the node binary's pages, glibc's main heap, anonymous
// memory: the V8 heap, thread stacks and large malloc blocks). Baseline in the
// same run: the same process before the server starts. Context for the
// target "server RSS < 100 MB with 100,000 live shares under load".
//   node bench/keyserver-rss.js          (BENCH_QUICK=1 for a tiny run)
import { readFileSync } from 'node:fs';
import { conditions, dist, fmt, quick, report } from './lib.js';

const { defaultConfig } = await import(dist('keyserver/cli/options.js'));
const { preloadShares, startBenchServer } = await import(dist('keyserver/bench/bench-server.js'));
const { runLoadProcess } = await import(dist('keyserver/bench/load-driver.js'));
const { RssSampler, collectGarbage } = await import(dist('keyserver/bench/report.js'));
const { benchPublicKey } = await import(dist('keyserver/bench/requests.js'));

const SHARES = quick ? 2000 : 100000;
const REQUESTS = quick ? 2000 : 50000;

const settled = async () => {
  collectGarbage();
  await new Promise((resolve) => setTimeout(resolve, 100));
  collectGarbage();
};

/** RSS in bytes per kind of mapping: the node binary, glibc's brk heap, anonymous maps, the rest. */
function rssByMapping() {
  const out = { node: 0, heap: 0, anon: 0, other: 0 };
  let kind = 'other';
  for (const line of readFileSync('/proc/self/smaps', 'utf8').split('\n')) {
    const head = /^[0-9a-f]+-[0-9a-f]+ \S+ \S+ \S+ \S+\s*(.*)$/.exec(line);
    if (head) {
      const name = head[1];
      kind =
        name === ''
          ? 'anon'
          : name === '[heap]'
            ? 'heap'
            : name === process.execPath || name.endsWith('/node')
              ? 'node'
              : 'other';
      continue;
    }
    const rss = /^Rss:\s+(\d+) kB/.exec(line);
    if (rss) out[kind] += Number(rss[1]) * 1024;
  }
  return out;
}

const rows = [];
const stage = (name, rss = undefined) => {
  const m = process.memoryUsage();
  // '-': under 0.05 MB (no array buffers yet before the server starts).
  const small = (bytes) => (bytes < 52429 ? '-' : fmt.mb(bytes));
  rows.push([
    name,
    fmt.mb(rss ?? m.rss),
    fmt.mb(m.heapTotal),
    fmt.mb(m.heapUsed),
    small(m.arrayBuffers),
    small(m.external - m.arrayBuffers),
  ]);
};

await settled();
stage('before the server starts (baseline)');
const config = { ...defaultConfig(), requests: REQUESTS, payloadBytes: 0 };
const server = await startBenchServer(config, false, false);
let rps;
let split;
try {
  await settled();
  stage('server listening, empty store');
  const keys = Array.from({ length: 16 }, benchPublicKey);
  const codes = await preloadShares(server.running.store, server.running.config, SHARES, keys);
  stage(`${fmt.int(SHARES)} shares preloaded`);
  await settled();
  stage('after a full GC');
  const sampler = new RssSampler();
  sampler.start();
  const summary = await runLoadProcess({
    mode: 'fetch',
    url: server.url,
    total: REQUESTS,
    concurrency: 64,
    payloadBytes: 0,
    keys: keys.map((k) => k.toString('base64')),
    codes,
    progress: false,
    cpu: undefined,
    client: 'raw',
  });
  stage(`peak RSS during ${fmt.int(REQUESTS)} fetches`, sampler.stop());
  rps = summary.requests / summary.seconds;
  await settled();
  stage('after the load and a full GC');
  split = rssByMapping();
} finally {
  await server.close();
}
report(
  `Key server memory by stage, ${fmt.int(SHARES)} shares, fetch load`,
  ['stage', 'RSS MB', 'V8 heap total MB', 'V8 heap used MB', 'array buffers MB', 'other external MB'],
  rows,
  [
    `fetch load: ${fmt.int(rps)} fetches/s (unpinned; the load generator is a separate process, not counted)`,
    `RSS after the load by mapping: node binary ${fmt.mb(split.node)} MB, glibc heap ${fmt.mb(split.heap)} MB, anonymous (V8 heap, thread stacks, large malloc blocks) ${fmt.mb(split.anon)} MB, other ${fmt.mb(split.other)} MB`,
    'command: `node bench/keyserver-rss.js` (server and preloading in this process, as in `stash_key_server bench-http-fetch`; shares written through ShareStore.put + verify)',
    `conditions: ${conditions()}`,
  ],
);
