// Fetch throughput of the key server on one core beside a bare node:http
// server on the same core answering the same bytes with the same headers,
// load from wrk on the other core, interleaved rounds (targets: JSON >= 0.8,
// binary >= 1.2). Both encodings: binary (what the
// stash CLI sends) and JSON; the binary one also beside nginx answering
// `return 200` with a body of the same length on the same core (when nginx
// is installed).
//   node bench/keyserver-fetch.js        (BENCH_QUICK=1 for a tiny run; BENCH_ROUNDS=N, default 5)
// Without wrk it falls back to the Node load generator of bench/keyserver-vs-bare.js
// (which cannot saturate the bare server: its ratio flatters the key server).
import { conditions, fmt, pinning, quick, recordTarget, report } from './lib.js';
import {
  haveNginx,
  haveWrk,
  parseAnswer,
  preloadedStore,
  rawExchange,
  runWrk,
  startExactBare,
  startKeyServer,
  startNginx,
  withoutDate,
  wrkScript,
} from './wrk.js';

const TARGET = 0.8;
/** Issue 30, binary fetches. */
const BINARY_TARGET = 1.2;

if (!haveWrk) {
  process.stdout.write(
    'wrk is not installed (Debian: apt-get install wrk): falling back to the Node load generator, whose ratio flatters the key server\n\n',
  );
  const { compareWithBare } = await import('./keyserver-vs-bare.js');
  await compareWithBare({
    title: 'Key server fetch vs bare node:http (Node load generator)',
    command: 'bench-http-fetch',
    requests: 50000,
    quickRequests: 300,
    target: 0.6,
  });
  process.exit(0);
}

const rounds = Number(process.env.BENCH_ROUNDS ?? (quick ? 1 : 5));
const seconds = quick ? 1 : 5;
const { encodeShareRequest, BINARY_MEDIA_TYPE, JSON_MEDIA_TYPE } = await import('../dist/keyserver/wire/messages.js');

const store = await preloadedStore(quick ? 10 : 1000);
const cpu = pinning?.server;
const load = pinning?.load;
const servers = [];
let wrkArgv = [];
try {
  const ks = await startKeyServer({ dir: store.dir, cpu });
  servers.push(ks);
  const code = store.codes[0];
  const encodings = [
    {
      name: 'binary',
      path: '/v1/share',
      body: encodeShareRequest({ op: 'fetch', code }),
      headers: { 'Content-Type': BINARY_MEDIA_TYPE, Accept: BINARY_MEDIA_TYPE },
    },
    {
      name: 'JSON',
      path: '/v1/share',
      body: Buffer.from(JSON.stringify({ op: 'fetch', code })),
      headers: { 'Content-Type': JSON_MEDIA_TYPE, Accept: JSON_MEDIA_TYPE },
    },
  ];
  const rows = [];
  const notes = [];
  for (const enc of encodings) {
    // The bare server answers the key server's own answer, captured here, byte for byte.
    const raw = await rawExchange(ks.url, enc);
    const answer = parseAnswer(raw);
    if (answer.status !== 200)
      throw new Error(
        `the key server answered ${answer.status} to a fetch: ${answer.body.toString('latin1').slice(0, 200)}`,
      );
    const bare = await startExactBare(answer, cpu);
    servers.push(bare);
    const bareRaw = await rawExchange(bare.url, enc);
    // The fetch count differs from one answer to the next: compare the bare answer with itself, the rest byte for byte.
    if (withoutDate(bareRaw).length !== withoutDate(raw).length || withoutDate(bareRaw) !== withoutDate(raw)) {
      throw new Error(
        `the bare server's answer differs from the key server's:\n${withoutDate(raw)}\n---\n${withoutDate(bareRaw)}`,
      );
    }
    const script = wrkScript(store.dir, `fetch-${enc.name}`, enc);
    const nginx =
      enc.name === 'binary' && haveNginx
        ? await startNginx({
            bodyBytes: answer.body.length,
            contentType: answer.headers.find(([n]) => /^content-type$/i.test(n))[1],
            cpu,
          })
        : undefined;
    if (nginx) servers.push(nginx);
    // Warm-up: the JIT of both servers, before any timed round (not in quick mode, whose
    // figures mean nothing: it shows the script works, and its test runs in every CI).
    if (!quick)
      for (const url of [ks.url, bare.url, ...(nginx ? [nginx.url] : [])])
        await runWrk({ url, script, seconds: 1, cpu: load });
    const r = { ks: [], bare: [], nginx: [] };
    for (let i = 0; i < rounds; i++) {
      r.ks.push(await runWrk({ url: ks.url, script, seconds, cpu: load }));
      r.bare.push(await runWrk({ url: bare.url, script, seconds, cpu: load }));
      if (nginx) r.nginx.push(await runWrk({ url: nginx.url, script, seconds, cpu: load }));
    }
    wrkArgv = r.ks[0].argv.map((a) => (a.endsWith('.lua') ? 'fetch.lua' : a));
    for (const x of [...r.ks, ...r.bare, ...r.nginx])
      if (x.errors > 0) throw new Error(`wrk saw ${x.errors} failed requests:\n${x.output}`);
    const ratios = r.ks.map((x, i) => x.rps / r.bare[i].rps);
    const med = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
    const ksMed = med(r.ks.map((x) => x.rps));
    const bareMed = med(r.bare.map((x) => x.rps));
    const ratio = med(ratios);
    const pick = (xs, v) => xs.find((x) => x.rps === v);
    const target = enc.name === 'binary' ? BINARY_TARGET : TARGET;
    rows.push([
      `stash_key_server run, ${enc.name}`,
      fmt.int(ksMed),
      `${fmt.int(Math.min(...r.ks.map((x) => x.rps)))}-${fmt.int(Math.max(...r.ks.map((x) => x.rps)))}`,
      fmt.ms(pick(r.ks, ksMed).p50),
      fmt.ms(pick(r.ks, ksMed).p99),
      fmt.ratio(ratio),
      `>= ${target}: ${ratio >= target ? 'met' : 'not met'}`,
    ]);
    rows.push([
      `bare node:http, the same ${answer.body.length} B ${enc.name} answer and headers`,
      fmt.int(bareMed),
      `${fmt.int(Math.min(...r.bare.map((x) => x.rps)))}-${fmt.int(Math.max(...r.bare.map((x) => x.rps)))}`,
      fmt.ms(pick(r.bare, bareMed).p50),
      fmt.ms(pick(r.bare, bareMed).p99),
      '1.00',
      '-',
    ]);
    notes.push(
      `${enc.name}: ratio round by round ${ratios.map(fmt.ratio).join(', ')} (the ratio column is their median)`,
    );
    const wrkLine = `${r.ks[0].argv.map((a) => (a.endsWith('.lua') ? 'fetch.lua' : a)).join(' ')}`;
    if (enc.name === 'binary') {
      recordTarget({
        figure: 'fetch-binary',
        value: `${fmt.ratio(ratio)} (${fmt.int(ksMed)}/s; rounds ${ratios.map(fmt.ratio).join(', ')})`,
        baseline: `bare node:http ${fmt.int(bareMed)}/s, same bytes`,
        target: `>= ${BINARY_TARGET}`,
        met: ratio >= BINARY_TARGET,
        command: `node bench/keyserver-fetch.js (${wrkLine})`,
      });
    }
    if (nginx) {
      const nginxRatios = r.ks.map((x, i) => x.rps / r.nginx[i].rps);
      const nginxMed = med(r.nginx.map((x) => x.rps));
      rows.push([
        `nginx \`return 200\`, ${answer.body.length} B body, one process`,
        fmt.int(nginxMed),
        `${fmt.int(Math.min(...r.nginx.map((x) => x.rps)))}-${fmt.int(Math.max(...r.nginx.map((x) => x.rps)))}`,
        fmt.ms(pick(r.nginx, nginxMed).p50),
        fmt.ms(pick(r.nginx, nginxMed).p99),
        fmt.ratio(nginxMed / bareMed),
        `key server / nginx ${fmt.ratio(med(nginxRatios))}`,
      ]);
      notes.push(`${enc.name}: key server against nginx round by round ${nginxRatios.map(fmt.ratio).join(', ')}`);
      recordTarget({
        figure: 'fetch-binary-nginx',
        value: `${fmt.ratio(med(nginxRatios))} (rounds ${nginxRatios.map(fmt.ratio).join(', ')})`,
        baseline: `nginx return 200 ${fmt.int(nginxMed)}/s`,
        target: 'reported beside the above',
        met: undefined,
        command: `node bench/keyserver-fetch.js (${wrkLine})`,
      });
      await nginx.stop();
    } else if (enc.name === 'binary') {
      notes.push('nginx is not installed (Debian: apt-get install nginx-light): the nginx row is not measured');
    }
    await bare.stop();
  }
  report(
    'Key server fetch vs bare node:http (wrk)',
    ['server', 'req/s (median)', `range of ${rounds} rounds`, 'p50 ms', 'p99 ms', 'ratio to bare', 'target'],
    rows,
    [
      'command: `node bench/keyserver-fetch.js`: the real `stash_key_server run` over a store of preloaded verified shares (request limits off), every fetch of one live share',
      `load: \`${wrkArgv.join(' ')}\` (wrk ${seconds} s per round, 64 connections, one thread), ${rounds} interleaved round(s) (BENCH_ROUNDS) ${quick ? 'without warm-up (quick mode)' : 'after a 1 s warm-up of each server'}`,
      `${pinning ? `servers on CPU ${pinning.server}, wrk on CPU ${pinning.load}` : 'not pinned (no taskset or one CPU)'}; targets: binary >= ${BINARY_TARGET}, JSON >= ${TARGET}`,
      ...notes,
      `conditions: ${conditions()}`,
    ],
  );
} finally {
  for (const s of servers) await s.stop();
  store.remove();
}
