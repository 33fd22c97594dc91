// Key server benchmark beside a bare node:http server answering a body of the
// same size (and Koa + @koa/router alone), back to back in one run. The key
// server's own command drives itself with the lean raw-socket client
// (dist/keyserver/bench/load-process.js: a flow needs the mailed link, which
// only that client can ask for); the baselines are loaded by wrk, the C load
// generator, because the lean client cannot saturate bare node:http on one
// core (about two thirds of wrk's figure, docs/benchmarks.md), which would
// flatter the ratio. Whether the lean client out-ran the key server shows in
// its own CPU share while it loaded it (below 1: it waited for the server);
// its figure on the bare server is printed too. The server runs on CPU 0 and
// the load generator on CPU 1 when taskset exists.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { bin, conditions, dist, fmt, pinned, pinning, quick, recordTarget, report, root, run } from './lib.js';
import { haveWrk, runWrk, stop, wrkScript } from './wrk.js';

const { loadClientFromEnv, runLoadProcess } = await import(dist('keyserver/bench/load-driver.js'));

/** wrk's run per baseline round (after a 1 s warm-up outside quick mode). */
const wrkSeconds = quick ? 1 : 4;

/** Starts a baseline server on CPU 0; resolves with its URL and a stop function. */
async function startBaseline(script, ks) {
  const argv = pinned(pinning?.server, [process.execPath, script, String(ks.response_bytes)]);
  const server = spawn(argv[0], argv.slice(1), { cwd: root, stdio: ['ignore', 'pipe', 'inherit'] });
  const [line] = await once(server.stdout, 'data');
  // Waited for: the next server pinned to the same CPU must not start beside this one.
  return { url: String(line).trim(), stop: () => stop(server) };
}

/** The request the key server's command sent, as the baselines get it: the same size, body type and path. */
function baselineRequest(ks) {
  return {
    path: '/v1/share',
    body: Buffer.alloc(ks.request_bytes, 0x62),
    contentType: 'application/vnd.stash.v1+binary',
  };
}

/** A baseline server's figures under wrk (64 connections, one thread, on the load CPU). */
async function baselineByWrk(script, ks, dir) {
  const server = await startBaseline(script, ks);
  try {
    const req = baselineRequest(ks);
    const lua = wrkScript(dir, 'baseline', {
      path: req.path,
      body: req.body,
      headers: { 'Content-Type': req.contentType },
    });
    const connections = ks.concurrency;
    const runs = quick ? [wrkSeconds] : [1, wrkSeconds]; // a warm-up first, checked too
    let r;
    for (const seconds of runs) {
      r = await runWrk({ url: server.url, script: lua, seconds, connections, cpu: pinning?.load });
      if (r.errors > 0) throw new Error(`${script} under wrk: ${r.errors} failed requests:\n${r.output}`);
    }
    return { rps: r.rps, p50: r.p50, p99: r.p99 };
  } finally {
    await server.stop();
  }
}

/** A baseline server's figures under the lean client, `total` requests. */
async function baselineByLeanClient(script, ks, total) {
  const server = await startBaseline(script, ks);
  try {
    const req = baselineRequest(ks);
    const summary = await runLoadProcess({
      mode: 'raw',
      url: server.url,
      total,
      concurrency: ks.concurrency,
      payloadBytes: 0,
      keys: [],
      codes: [],
      raw: { path: req.path, body: req.body.toString('base64'), contentType: req.contentType },
      progress: false,
      cpu: pinning?.load,
      client: loadClientFromEnv(),
    });
    if (summary.errors > 0) throw new Error(`${script}: ${summary.errors} errors (${summary.firstError})`);
    const { LatencyHistogram } = await import(dist('keyserver/bench/histogram.js'));
    const h = LatencyHistogram.fromData(summary.histogram);
    return { rps: summary.requests / summary.seconds, p50: h.percentile(50) / 1000, p99: h.percentile(99) / 1000 };
  } finally {
    await server.stop();
  }
}

/**
 * What the lean client's own CPU share says (in the round of median throughput): below
 * about 0.9 of its core it waited for the key server, so the server limited
 * the rate, not the client.
 */
function loadShare(ks) {
  const share = ks.extra?.load_cpu_share;
  if (typeof share !== 'number') return 'its CPU share was not reported';
  const verdict = share < 0.9 ? 'it waited for the server (the server set the rate)' : 'it may have limited the rate';
  return `${Math.round(share * 100)} % of its CPU, ${verdict}`;
}

/** BENCH_ROUNDS (default 3, 1 in quick mode): interleaved rounds, so a load spike of other processes hits one round, not one server. */
const rounds = Number(process.env.BENCH_ROUNDS ?? (quick ? 1 : 3));

/** The round with the median throughput. */
function median(results, rps) {
  return [...results].sort((a, b) => rps(a) - rps(b))[Math.floor(results.length / 2)];
}

/**
 * Runs `stash_key_server <command> --json`, the bare server (by wrk, and by
 * the lean client for its ceiling) and Koa alone (by wrk), interleaved for
 * BENCH_ROUNDS rounds, and prints the medians and the ratio to bare by wrk.
 * Without wrk the baselines fall back to the lean client, and the table says
 * so. `perOperation`: HTTP requests in one operation of the command (3 for a
 * flow), so that the ratio compares requests/s with requests/s. `target` is
 * the ratio the issue asks for (undefined: none); `figure` names it for
 * bench/run-all.js's summary.
 */
export async function compareWithBare({
  title,
  command,
  requests,
  quickRequests,
  args = [],
  target,
  perOperation = 1,
  figure,
}) {
  const n = quick ? quickRequests : requests;
  const argv = pinned(pinning?.server, [
    process.execPath,
    bin('stash_key_server.js'),
    command,
    '--json',
    '--requests',
    String(n),
    '--payload-bytes',
    '0',
    ...args,
  ]);
  const env = { ...process.env, ...(pinning ? { STASH_BENCH_LOAD_CPU: String(pinning.load) } : {}) };
  const dir = mkdtempSync(join(tmpdir(), 'stash-bench-vs-bare-'));
  const all = { ks: [], base: [], lean: [], koa: [] };
  try {
    for (let round = 0; round < rounds; round++) {
      const ks = JSON.parse((await run(argv, { env })).trim().split('\n').pop());
      if (ks.errors > 0) throw new Error(`${command}: ${ks.errors} errors`);
      all.ks.push(ks);
      const total = ks.requests * perOperation;
      all.lean.push(await baselineByLeanClient('bench/bare-server.js', ks, total));
      if (haveWrk) {
        all.base.push(await baselineByWrk('bench/bare-server.js', ks, dir));
        all.koa.push(await baselineByWrk('bench/koa-server.js', ks, dir));
      } else {
        all.base.push(all.lean.at(-1));
        all.koa.push(await baselineByLeanClient('bench/koa-server.js', ks, total));
      }
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  const ks = median(all.ks, (r) => r.requests_per_second);
  const base = median(all.base, (r) => r.rps);
  const lean = median(all.lean, (r) => r.rps);
  const koa = median(all.koa, (r) => r.rps);
  // The medians above can come from different rounds; on a busy machine the per-round ratios say more.
  const roundRatios = all.ks.map((r, i) => (r.requests_per_second * perOperation) / all.base[i].rps);
  const ratio = [...roundRatios].sort((a, b) => a - b)[Math.floor(roundRatios.length / 2)];
  const unit = perOperation === 1 ? 'req/s' : `operations/s (x ${perOperation} requests)`;
  const spread = (xs) => `${fmt.int(Math.min(...xs))}-${fmt.int(Math.max(...xs))}`;
  const command_ = `${pinning ? `STASH_BENCH_LOAD_CPU=${pinning.load} ` : ''}${argv.join(' ').replace(process.execPath, 'node').replace(root, '')}`;
  const leanName = loadClientFromEnv() === 'raw' ? 'lean raw-socket HTTP/1.1 client' : 'node:http keep-alive Agent';
  const by = haveWrk ? 'wrk' : `the ${leanName} (no wrk: the ratio flatters the key server)`;
  /** A baseline's row: its median round's figures, the range of its rounds, and its ratio to bare. */
  const baselineRow = (name, med, all, ratio) => [
    name,
    fmt.int(med.rps),
    spread(all.map((r) => r.rps)),
    fmt.ms(med.p50),
    fmt.ms(med.p99),
    '-',
    ratio,
  ];
  report(
    title,
    [
      'server (load generator)',
      `${unit} (median)`,
      `range of ${rounds} rounds`,
      'p50 ms',
      'p99 ms',
      'peak RSS MB',
      `ratio of requests/s to bare by ${haveWrk ? 'wrk' : 'the lean client'} (median of rounds)${target ? `, target >= ${target}` : ''}`,
    ],
    [
      [
        `stash_key_server ${command} (its ${leanName})`,
        fmt.int(ks.requests_per_second),
        spread(all.ks.map((r) => r.requests_per_second)),
        fmt.ms(ks.latency_ms.p50),
        fmt.ms(ks.latency_ms.p99),
        fmt.mb(ks.server_peak_rss_bytes),
        `${fmt.ratio(ratio)}${target ? (ratio >= target ? ' met' : ' not met') : ''}`,
      ],
      baselineRow(
        `bare node:http, ${ks.response_bytes} B answer (${haveWrk ? 'wrk' : leanName})`,
        base,
        all.base,
        '1.00',
      ),
      ...(haveWrk
        ? [
            baselineRow(
              `bare node:http, the same (${leanName}: its ceiling)`,
              lean,
              all.lean,
              fmt.ratio(lean.rps / base.rps),
            ),
          ]
        : []),
      baselineRow(
        `Koa + @koa/router only, ${ks.response_bytes} B answer (${haveWrk ? 'wrk' : leanName})`,
        koa,
        all.koa,
        fmt.ratio(koa.rps / base.rps),
      ),
    ],
    [
      `command: \`${command_}\`; ${rounds} interleaved round(s) (BENCH_ROUNDS)`,
      `${fmt.int(ks.requests)} ${perOperation === 1 ? 'requests' : `operations (${fmt.int(ks.requests * perOperation)} requests)`} of the key server by its ${leanName}, concurrency ${ks.concurrency}, ${ks.request_bytes} B binary request bodies, ${ks.response_bytes} B answers; baselines loaded by ${by}${haveWrk ? ` (\`wrk -t 1 -c ${ks.concurrency} -d ${wrkSeconds}s\`${quick ? '' : ' after 1 s of warm-up'}, the same body size, type and path)` : ''}; ${pinning ? `server on CPU ${pinning.server}, load generator on CPU ${pinning.load}` : 'not pinned (no taskset or one CPU)'}`,
      `the lean client while it loaded the key server: ${loadShare(ks)}; on bare node:http it reached ${fmt.ratio(lean.rps / (ks.requests_per_second * perOperation))} x the key server's requests/s${haveWrk ? ` and ${fmt.ratio(lean.rps / base.rps)} x wrk's` : ''}`,
      `ratio to bare round by round (each round runs both back to back${perOperation === 1 ? '' : `; ${perOperation} x operations/s against requests/s`}): ${roundRatios.map(fmt.ratio).join(', ')}; median ${fmt.ratio(ratio)}`,
      `conditions: ${conditions()}`,
    ],
  );
  if (figure) {
    recordTarget({
      figure,
      value: `${fmt.ratio(ratio)} (${fmt.int(ks.requests_per_second)}${perOperation === 1 ? '' : ` x ${perOperation}`}/s; rounds ${roundRatios.map(fmt.ratio).join(', ')})`,
      baseline: `bare node:http ${fmt.int(base.rps)} req/s by ${haveWrk ? 'wrk' : 'the lean client'}`,
      target: `>= ${target}`,
      met: ratio >= target,
      command: command_,
    });
  }
  return { ks, base, koa, ratio };
}
