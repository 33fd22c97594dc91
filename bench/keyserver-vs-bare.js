// Key server benchmark beside a bare node:http server answering a body of the
// same size (and Koa + @koa/router alone), back to back in one run, with the same load generator
// (dist/keyserver/bench/load-process.js). The server runs on CPU 0 and the
// load generator on CPU 1 when taskset exists.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { bin, conditions, dist, fmt, pinned, pinning, quick, recordTarget, report, root, run } from './lib.js';

const { loadClientFromEnv, runLoadProcess } = await import(dist('keyserver/bench/load-driver.js'));

/** A baseline server's figures for the same number of requests, body sizes and concurrency. */
async function baseline(script, ks, total) {
  const argv = pinned(pinning?.server, [process.execPath, script, String(ks.response_bytes)]);
  const server = spawn(argv[0], argv.slice(1), { cwd: root, stdio: ['ignore', 'pipe', 'inherit'] });
  try {
    const [line] = await once(server.stdout, 'data');
    const url = String(line).trim();
    const summary = await runLoadProcess({
      mode: 'raw',
      url,
      total,
      concurrency: ks.concurrency,
      payloadBytes: 0,
      keys: [],
      codes: [],
      raw: {
        path: '/v1/share',
        body: Buffer.alloc(ks.request_bytes, 0x62).toString('base64'),
        contentType: 'application/vnd.stash.v1+binary',
      },
      progress: false,
      cpu: pinning?.load,
      client: loadClientFromEnv(),
    });
    if (summary.errors > 0) throw new Error(`${script}: ${summary.errors} errors (${summary.firstError})`);
    const { LatencyHistogram } = await import(dist('keyserver/bench/histogram.js'));
    const h = LatencyHistogram.fromData(summary.histogram);
    return { rps: summary.requests / summary.seconds, p50: h.percentile(50) / 1000, p99: h.percentile(99) / 1000 };
  } finally {
    server.kill('SIGTERM');
  }
}

/** BENCH_ROUNDS (default 3, 1 in quick mode): interleaved rounds, so a load spike of other processes hits one round, not one server. */
const rounds = Number(process.env.BENCH_ROUNDS ?? (quick ? 1 : 3));

/** The round with the median throughput. */
function median(results, rps) {
  return [...results].sort((a, b) => rps(a) - rps(b))[Math.floor(results.length / 2)];
}

/**
 * Runs `stash_key_server <command> --json`, the bare server and Koa alone,
 * interleaved for BENCH_ROUNDS rounds, and prints the medians and the ratio.
 * `perOperation`: HTTP requests in one operation of the command (3 for a
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
  const all = { ks: [], base: [], koa: [] };
  for (let round = 0; round < rounds; round++) {
    const ks = JSON.parse((await run(argv, { env })).trim().split('\n').pop());
    if (ks.errors > 0) throw new Error(`${command}: ${ks.errors} errors`);
    all.ks.push(ks);
    all.base.push(await baseline('bench/bare-server.js', ks, ks.requests * perOperation));
    all.koa.push(await baseline('bench/koa-server.js', ks, ks.requests * perOperation));
  }
  const ks = median(all.ks, (r) => r.requests_per_second);
  const base = median(all.base, (r) => r.rps);
  const koa = median(all.koa, (r) => r.rps);
  // The medians above can come from different rounds; on a busy machine the per-round ratios say more.
  const roundRatios = all.ks.map((r, i) => (r.requests_per_second * perOperation) / all.base[i].rps);
  const ratio = [...roundRatios].sort((a, b) => a - b)[Math.floor(roundRatios.length / 2)];
  const unit = perOperation === 1 ? 'req/s' : `operations/s (x ${perOperation} requests)`;
  const spread = (xs) => `${fmt.int(Math.min(...xs))}-${fmt.int(Math.max(...xs))}`;
  const command_ = `${pinning ? `STASH_BENCH_LOAD_CPU=${pinning.load} ` : ''}${argv.join(' ').replace(process.execPath, 'node').replace(root, '')}`;
  report(
    title,
    [
      'server',
      `${unit} (median)`,
      `range of ${rounds} rounds`,
      'p50 ms',
      'p99 ms',
      'peak RSS MB',
      `ratio of requests/s to bare (median of rounds)${target ? `, target >= ${target}` : ''}`,
    ],
    [
      [
        `stash_key_server ${command}`,
        fmt.int(ks.requests_per_second),
        spread(all.ks.map((r) => r.requests_per_second)),
        fmt.ms(ks.latency_ms.p50),
        fmt.ms(ks.latency_ms.p99),
        fmt.mb(ks.server_peak_rss_bytes),
        `${fmt.ratio(ratio)}${target ? (ratio >= target ? ' met' : ' not met') : ''}`,
      ],
      [
        `bare node:http, ${ks.response_bytes} B answer`,
        fmt.int(base.rps),
        spread(all.base.map((r) => r.rps)),
        fmt.ms(base.p50),
        fmt.ms(base.p99),
        '-',
        '1.00',
      ],
      [
        `Koa + @koa/router only, ${ks.response_bytes} B answer`,
        fmt.int(koa.rps),
        spread(all.koa.map((r) => r.rps)),
        fmt.ms(koa.p50),
        fmt.ms(koa.p99),
        '-',
        fmt.ratio(koa.rps / base.rps),
      ],
    ],
    [
      `command: \`${command_}\`; ${rounds} interleaved round(s) (BENCH_ROUNDS)`,
      `${fmt.int(ks.requests)} ${perOperation === 1 ? 'requests' : `operations (${fmt.int(ks.requests * perOperation)} requests)`} of the key server, ${fmt.int(ks.requests * perOperation)} requests of each baseline, ${loadClientFromEnv() === 'raw' ? 'lean raw-socket HTTP/1.1 client' : 'node:http keep-alive Agent'}, concurrency ${ks.concurrency}, ${ks.request_bytes} B binary request bodies, ${ks.response_bytes} B answers; ${pinning ? `server on CPU ${pinning.server}, load generator on CPU ${pinning.load}` : 'not pinned (no taskset or one CPU)'}`,
      `ratio to bare round by round (each round runs both back to back${perOperation === 1 ? '' : `; ${perOperation} x operations/s against requests/s`}): ${roundRatios.map(fmt.ratio).join(', ')}; median ${fmt.ratio(ratio)}`,
      `conditions: ${conditions()}`,
    ],
  );
  if (figure) {
    recordTarget({
      figure,
      value: `${fmt.ratio(ratio)} (${fmt.int(ks.requests_per_second)}${perOperation === 1 ? '' : ` x ${perOperation}`}/s; rounds ${roundRatios.map(fmt.ratio).join(', ')})`,
      baseline: `bare node:http ${fmt.int(base.rps)} req/s`,
      target: `>= ${target}`,
      met: ratio >= target,
      command: command_,
    });
  }
  return { ks, base, koa, ratio };
}
