/**
 * GET /metrics: counts that match what was asked of a real server, loopback
 * only on the main address, `promtool check metrics` on what a server under
 * load with --processes 2 answers (one view of both processes), and a real
 * Prometheus scraping --metrics-bind.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { spawn, spawnSync } from 'node:child_process';
import { request as httpsRequest } from 'node:https';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fetchShare, publish } from '../../src/keyserver/client.js';
import { generateShareCode } from '../../src/keyserver/share-code.js';
import { freePorts, startServerProcess, waitFor, LIMITS_OFF } from './cluster.js';
import { http, identityPublicKey, mailSink, postJson, startTestServer, tempDir } from './harness.js';
import { haveCommand, needFacility } from '../helpers/facility.js';
import { issueCert, makeCa } from './test-pki.js';

const key = identityPublicKey();

/** The value of one series in an exposition (undefined when absent). */
function sample(text: string, series: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

/** The sum of every series of `family` whose labels include all of `having`. */
function total(text: string, family: string, having: string[] = []): number {
  let n = 0;
  for (const l of text.split('\n')) {
    if (!l.startsWith(`${family}{`) && !l.startsWith(`${family} `)) continue;
    if (having.every((h) => l.includes(h))) n += Number(l.slice(l.lastIndexOf(' ') + 1));
  }
  return n;
}

function promtool(text: string): { ok: boolean; output: string } {
  const r = spawnSync('promtool', ['check', 'metrics'], { input: text, encoding: 'utf8', timeout: 30_000 });
  return { ok: r.status === 0, output: `${r.stdout ?? ''}${r.stderr ?? ''}` };
}

test('counts match the requests made; loopback only; no address, code or token in any label', async () => {
  // trust_proxy: the client address is the last X-Forwarded-For entry, so one loopback socket can be any caller.
  const s = await startTestServer({
    config: { trustProxy: true, rateLimitPerMinute: 60, rateLimitBurst: 40, verificationEmailRateLimitPerHour: 2 },
  });
  try {
    const asClient = (ip: string) => ({ 'X-Forwarded-For': ip });
    const email = 'alice.metrics@example.org';
    const created: string[] = [];
    for (let i = 0; i < 3; i++) {
      const r = await postJson(
        s.url,
        { op: 'create', public_key: key.toString('base64'), email },
        '/v1/share',
        asClient('198.51.100.7'),
      );
      if (r.status === 201) created.push(r.json().code);
      else assert.is(r.json().error.limit, 'emails-per-address', r.text);
    }
    assert.is(created.length, 2, 'two mails per hour for one address');
    const link = new URL(s.sink.lastLink(email));
    assert.is(
      (await http(`${s.url}${link.pathname}`, { method: 'POST', headers: asClient('198.51.100.7') })).status,
      200,
    );
    const fetch = (code: string) => postJson(s.url, { op: 'fetch', code }, '/v1/share', asClient('198.51.100.8'));
    const [confirmed, pending] = [created[1]!, created[0]!];
    assert.is((await fetch(confirmed)).status, 200);
    assert.is((await fetch(confirmed)).status, 200);
    assert.is((await fetch(pending)).status, 409);
    assert.is((await fetch(generateShareCode(0, 0).display)).status, 404);
    // 5 tokens a miss: 40 of burst are soon gone.
    let refused = 0;
    for (let i = 0; i < 12 && refused === 0; i++)
      if ((await fetch(generateShareCode(0, 0).display)).status === 429) refused++;
    assert.is(refused, 1);

    const outside = await http(`${s.url}/metrics`, {
      headers: { ...asClient('203.0.113.9'), Accept: 'application/json' },
    });
    assert.is(outside.status, 403);
    assert.is(outside.json().error.code, 'METRICS_FORBIDDEN');
    assert.match(outside.json().error.message, /loopback.*--metrics-bind/);

    const m = await http(`${s.url}/metrics`, { headers: asClient('127.0.0.1') });
    assert.is(m.status, 200);
    assert.is(m.headers['content-type'], 'text/plain; version=0.0.4; charset=utf-8');
    const text = m.text;
    const P = 'stash_keyserver_';
    assert.is(sample(text, `${P}publishes_total`), 2);
    assert.is(sample(text, `${P}confirmations_total`), 1);
    assert.is(sample(text, `${P}verification_mails_total{result="sent"}`), 2);
    assert.is(sample(text, `${P}verification_mails_refused_total{limit="emails-per-address"}`), 1);
    assert.is(sample(text, `${P}fetches_total{result="found"}`), 2);
    assert.is(sample(text, `${P}fetches_total{result="pending"}`), 1);
    assert.ok(sample(text, `${P}fetches_total{result="missing"}`)! >= 2);
    assert.is(sample(text, `${P}rate_limited_total{limit="emails-per-address"}`), 1);
    assert.is(sample(text, `${P}rate_limited_total{limit="requests-per-ip"}`), 1);
    assert.is(sample(text, `${P}http_requests_total{endpoint="/v1/share",method="POST",status="201"}`), 2);
    assert.is(sample(text, `${P}http_requests_total{endpoint="/verify/{token}",method="POST",status="200"}`), 1);
    assert.is(sample(text, `${P}http_requests_total{endpoint="/metrics",method="GET",status="403"}`), 1);
    assert.is(sample(text, `${P}shares{state="live"}`), 1);
    assert.is(sample(text, `${P}shares{state="pending"}`), 1);
    assert.is(sample(text, `${P}store_bytes`), s.store.stats().storeBytes);
    assert.is(sample(text, `${P}disk_cap_bytes`), 100_000_000);
    assert.ok(sample(text, `${P}process_resident_memory_bytes{process="store"}`)! > 10e6);
    assert.ok(sample(text, `${P}event_loop_delay_p99_seconds{process="store"}`)! >= 0);
    assert.is(sample(text, `${P}tls_certificate_expiry_timestamp_seconds`), undefined, 'no TLS, no certificate');
    // Nothing that names a publisher, a share or a link.
    for (const secret of [
      'alice',
      'example.org',
      ...created,
      ...created.map((c) => c.replace(/-/g, '')),
      link.pathname.split('/').pop()!,
    ]) {
      assert.not.ok(text.includes(secret), `the metrics hold ${secret}`);
    }
    if (needFacility(haveCommand('promtool'), 'promtool', 'Debian package prometheus is not installed')) {
      const check = promtool(text);
      assert.ok(check.ok, check.output);
    }
  } finally {
    await s.stop();
  }
});

test('the certificate served: its notAfter, and the renewed one after a reload', async () => {
  if (!needFacility(haveCommand('openssl'), 'openssl', 'apt-get install openssl (a test CA)')) return;
  const pki = tempDir('metrics-pki');
  let s: Awaited<ReturnType<typeof startTestServer>> | undefined;
  try {
    const ca = makeCa(pki.path);
    const certPath = join(pki.path, 'served.pem');
    const keyPath = join(pki.path, 'served.key');
    const install = (end: Date) => {
      const c = issueCert(ca, { start: new Date(Date.now() - 3_600_000), end });
      writeFileSync(certPath, c.cert);
      writeFileSync(keyPath, c.key);
    };
    const scrape = () =>
      new Promise<string>((resolve, reject) => {
        const req = httpsRequest(`${s!.url}/metrics`, { ca: ca.pem, agent: false }, (res) => {
          let body = '';
          res
            .setEncoding('utf8')
            .on('data', (d) => {
              body += d;
            })
            .on('end', () => resolve(body));
        });
        req.on('error', reject);
        req.end();
      });
    const series = 'stash_keyserver_tls_certificate_expiry_timestamp_seconds';
    const first = new Date(Date.UTC(2031, 4, 6, 7, 8, 9));
    install(first);
    s = await startTestServer({ config: { tlsCert: certPath, tlsKey: keyPath } });
    assert.is(sample(await scrape(), series), first.getTime() / 1000);
    // Renewed files, read again on reload: the gauge follows what is served.
    const renewed = new Date(Date.UTC(2031, 7, 1, 0, 0, 0));
    install(renewed);
    const result = await s.reload({ ...s.config });
    assert.ok(result.applied.includes('tls_cert'), result.applied.join(', '));
    assert.is(sample(await scrape(), series), renewed.getTime() / 1000);
  } finally {
    await s?.stop();
    pki.remove();
  }
});

test('under load with --processes 2: every scrape passes promtool, counters never fall, and the last one counts every request of both processes', async () => {
  if (!needFacility(haveCommand('promtool'), 'promtool', 'Debian package prometheus is not installed')) return;
  const dir = tempDir('metrics-load');
  const sink = mailSink();
  const server = await startServerProcess([
    '--bind',
    '127.0.0.1:0',
    '--state-dir',
    dir.path,
    '--processes',
    '2',
    '--verification-email-command',
    sink.command,
    ...LIMITS_OFF,
  ]);
  try {
    await waitFor('the fetch process', () => /fetch process 1 started/.test(server.stderr()), 20_000);
    // 24 confirmed shares and 6 pending ones, published and confirmed through both processes (a connection each).
    const live: string[] = [];
    const pending: string[] = [];
    for (let i = 0; i < 30; i++) {
      const email = `load${i}@example.org`;
      const code = (await publish(server.url, key, email)).code;
      if (i % 5 === 4) {
        pending.push(code);
        continue;
      }
      const r = await http(`${server.url}${new URL(sink.lastLink(email)).pathname}`, { method: 'POST' });
      assert.is(r.status, 200);
      live.push(code);
    }
    const sent = { found: 0, pending: 0, missing: 0 };
    const statuses = new Map<number, number>();
    const scrapes: string[] = [];
    let done = false;
    const worker = async (w: number) => {
      for (let i = 0; i < 120; i++) {
        const kind = i % 10 === 0 ? 'missing' : i % 10 === 1 ? 'pending' : 'found';
        const code =
          kind === 'missing'
            ? generateShareCode(0, 0).display
            : kind === 'pending'
              ? pending[(w + i) % pending.length]!
              : live[(w * 7 + i) % live.length]!;
        const r = await postJson(server.url, { op: 'fetch', code });
        statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
        sent[kind]++;
      }
    };
    const scraper = async () => {
      while (!done) {
        const m = await http(`${server.url}/metrics`);
        assert.is(m.status, 200, m.text);
        scrapes.push(m.text);
        await new Promise((r) => setTimeout(r, 150));
      }
    };
    const scraping = scraper();
    await Promise.all(Array.from({ length: 6 }, (_, w) => worker(w)));
    done = true;
    await scraping;
    scrapes.push((await http(`${server.url}/metrics`)).text);
    assert.ok(scrapes.length >= 3, `${scrapes.length} scrapes`);
    assert.equal([...statuses.keys()].sort(), [200, 404, 409]);

    const P = 'stash_keyserver_';
    let previous = new Map<string, number>();
    for (const [i, text] of scrapes.entries()) {
      const check = promtool(text);
      assert.ok(check.ok, `scrape ${i}: ${check.output}`);
      const counters = new Map(
        text
          .split('\n')
          .filter((l) => /^stash_keyserver_\w+_total[{ ]/.test(l))
          .map((l) => [l.slice(0, l.lastIndexOf(' ')), Number(l.slice(l.lastIndexOf(' ') + 1))] as const),
      );
      for (const [s, v] of previous)
        assert.ok((counters.get(s) ?? 0) >= v, `scrape ${i}: ${s} fell from ${v} to ${counters.get(s)}`);
      previous = new Map(counters);
    }
    const last = scrapes[scrapes.length - 1]!;
    // Both processes are in the view: each one's gauges, and counts that add up to what was sent.
    assert.ok(sample(last, `${P}process_resident_memory_bytes{process="fetch-1"}`)! > 0, last);
    assert.ok(sample(last, `${P}process_resident_memory_bytes{process="store"}`)! > 0);
    assert.is(sample(last, `${P}fetches_total{result="found"}`), sent.found);
    assert.is(sample(last, `${P}fetches_total{result="pending"}`), sent.pending);
    assert.is(sample(last, `${P}fetches_total{result="missing"}`), sent.missing);
    assert.is(total(last, `${P}http_requests_total`, ['endpoint="/v1/share"', 'status="200"']), statuses.get(200));
    assert.is(total(last, `${P}http_requests_total`, ['endpoint="/v1/share"']), 30 + 720);
    assert.is(sample(last, `${P}publishes_total`), 30);
    assert.is(sample(last, `${P}confirmations_total`), 24);
    assert.is(
      total(last, `${P}http_requests_total`, ['endpoint="/metrics"']),
      scrapes.length - 1,
      'each scrape counts the ones before it',
    );
  } finally {
    await server.kill();
    sink.remove();
    dir.remove();
  }
});

test('--metrics-bind: a real Prometheus scrapes it; the main address still refuses non-loopback callers', async () => {
  if (!needFacility(haveCommand('prometheus'), 'prometheus', 'Debian package prometheus is not installed')) return;
  const dir = tempDir('metrics-bind');
  const [metricsPort, promPort] = await freePorts(2);
  const server = await startServerProcess([
    '--bind',
    '127.0.0.1:0',
    '--state-dir',
    join(dir.path, 'state'),
    '--metrics-bind',
    `127.0.0.1:${metricsPort}`,
    '--developer',
    ...LIMITS_OFF,
  ]);
  const promDir = join(dir.path, 'prometheus');
  mkdirSync(promDir);
  writeFileSync(
    join(promDir, 'prometheus.yml'),
    [
      'global:',
      '  scrape_interval: 1s',
      '  scrape_timeout: 1s',
      'scrape_configs:',
      '  - job_name: stash',
      '    static_configs:',
      `      - targets: ['127.0.0.1:${metricsPort}']`,
      '',
    ].join('\n'),
  );
  const prom = spawn(
    'prometheus',
    [
      `--config.file=${join(promDir, 'prometheus.yml')}`,
      `--storage.tsdb.path=${join(promDir, 'data')}`,
      `--web.listen-address=127.0.0.1:${promPort}`,
      '--log.level=warn',
    ],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  let promLog = '';
  prom.stderr!.on('data', (d) => {
    promLog += d;
  });
  try {
    for (let i = 0; i < 5; i++) await publish(server.url, key, `scraped${i}@example.org`);
    const plain = await http(`http://127.0.0.1:${metricsPort}/metrics`);
    assert.is(plain.status, 200);
    assert.is(sample(plain.text, 'stash_keyserver_publishes_total'), 5);
    assert.is((await http(`http://127.0.0.1:${metricsPort}/v1/status`)).status, 404, 'nothing but /metrics there');
    await fetchShare(server.url, generateShareCode(0, 0).display).catch(() => undefined);

    const query = async (q: string) => {
      const r = await http(`http://127.0.0.1:${promPort}/api/v1/query?query=${encodeURIComponent(q)}`).catch(
        () => undefined,
      );
      if (r?.status !== 200) return undefined;
      const result = r.json().data.result as Array<{ value: [number, string] }>;
      return result.length === 0 ? undefined : Number(result[0]!.value[1]);
    };
    await waitFor(
      `Prometheus scrapes the server (its log: ${promLog})`,
      async () => (await query('stash_keyserver_publishes_total{job="stash"}')) === 5,
      30_000,
    );
    assert.is(await query('up{job="stash"}'), 1);
    assert.is(await query('stash_keyserver_fetches_total{result="missing"}'), 1);
    const targets = (await http(`http://127.0.0.1:${promPort}/api/v1/targets`)).json().data.activeTargets as Array<{
      health: string;
      lastError: string;
    }>;
    assert.is(targets[0]!.health, 'up');
    assert.is(targets[0]!.lastError, '');
  } finally {
    prom.kill('SIGTERM');
    await new Promise<void>((r) =>
      prom.exitCode !== null || prom.signalCode !== null ? r() : prom.once('exit', () => r()),
    );
    await server.kill();
    dir.remove();
  }
});

test.run();
