/**
 * TLS as a well-run public service serves it (issue 28, item 5), checked
 * from outside with a real scanner (sslscan) and raw sockets against real
 * servers with certificates of a test CA: TLS 1.2 with ECDHE AEAD suites only
 * (RSA and EC certificates) and TLS 1.3, the same after a reload and in the
 * fetch processes; HSTS on every answer; a handshake that never finishes
 * closed at the headers deadline; 400 and one line for plain HTTP; warnings
 * and a `status` line for an expired, expiring or misnamed certificate.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { spawn } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { connect } from 'node:net';
import { join } from 'node:path';
import { defaultConfig } from '../../src/keyserver/cli/options.js';
import { haveCommand, needFacility } from '../helpers/facility.js';
import { startTestServer, tempDir } from './harness.js';
import { freePorts, runServerCommand, startServerProcess, waitFor } from './cluster.js';
import { issueCert, makeCa, type TestCa } from './test-pki.js';

const haveTools = () =>
  needFacility(
    haveCommand('openssl') && haveCommand('sslscan'),
    'openssl and sslscan',
    'apt-get install openssl sslscan',
  );

interface Scan {
  protocols: string[];
  ciphers: Array<{ version: string; name: string }>;
}

/** sslscan against 127.0.0.1:port: the protocol versions and suites the server accepts. */
async function sslscan(port: number, dir: string): Promise<Scan> {
  const xml = join(dir, `scan-${port}-${Date.now()}.xml`);
  const status = await new Promise<number | null>((resolve) => {
    const p = spawn('sslscan', ['--no-colour', '--no-heartbleed', `--xml=${xml}`, `127.0.0.1:${port}`], {
      stdio: 'ignore',
    });
    const timer = setTimeout(() => p.kill('SIGKILL'), 60_000);
    p.on('close', (code) => {
      clearTimeout(timer);
      resolve(code);
    });
  });
  assert.is(status, 0, 'sslscan ran');
  const text = readFileSync(xml, 'utf8');
  const protocols = [...text.matchAll(/<protocol type="(\w+)" version="([\d.]+)" enabled="1"/g)].map(
    (m) => `${m[1]}${m[2]}`,
  );
  const ciphers = [...text.matchAll(/<cipher status="\w+" sslversion="([\w.]+)" [^>]*cipher="([\w-]+)"/g)].map((m) => ({
    version: m[1]!,
    name: m[2]!,
  }));
  return { protocols, ciphers };
}

/** The profile: TLS 1.2 and 1.3 only; TLS 1.2 suites ECDHE + AES-GCM or ChaCha20-Poly1305 only. */
function assertProfile(scan: Scan, keyType: string): void {
  assert.equal(scan.protocols.sort(), ['tls1.2', 'tls1.3'], `protocols (${keyType})`);
  const tls12 = scan.ciphers.filter((c) => c.version === 'TLSv1.2').map((c) => c.name);
  assert.ok(tls12.length >= 2, `TLS 1.2 suites found (${keyType}): ${tls12.join(' ')}`);
  for (const name of tls12) {
    assert.ok(name.startsWith('ECDHE-'), `${name} has forward secrecy (${keyType})`);
    assert.ok(/-(AES(128|256)-GCM-SHA(256|384)|CHACHA20-POLY1305)$/.test(name), `${name} is AEAD (${keyType})`);
  }
  const tls13 = scan.ciphers.filter((c) => c.version === 'TLSv1.3').map((c) => c.name);
  assert.ok(tls13.length >= 1, `TLS 1.3 suites found (${keyType})`);
}

function withPki(body: (ca: TestCa, dir: string) => Promise<void>): () => Promise<void> {
  return async () => {
    if (!haveTools()) return;
    const dir = tempDir('tls-profile');
    try {
      await body(makeCa(dir.path), dir.path);
    } finally {
      dir.remove();
    }
  };
}

test(
  'a TLS scan finds TLS 1.2 with only ECDHE AEAD suites, and TLS 1.3, with an RSA and with an EC certificate, and after a reload',
  withPki(async (ca, dir) => {
    for (const keyType of ['rsa', 'ec'] as const) {
      const c = issueCert(ca, { keyType });
      const s = await startTestServer({ config: { tlsCert: c.certPath, tlsKey: c.keyPath } });
      try {
        const port = Number(new URL(s.url).port);
        assertProfile(await sslscan(port, dir), keyType);
        if (keyType === 'rsa') {
          // A renewal read by a reload keeps the profile (setSecureContext replaces the whole context).
          const renewed = issueCert(ca, { keyType });
          writeFileSync(c.certPath, renewed.cert);
          writeFileSync(c.keyPath, renewed.key);
          assert.ok((await s.reload({ ...defaultConfig(), ...s.config })).applied.includes('tls_cert'));
          assertProfile(await sslscan(port, dir), 'rsa after a reload');
        }
      } finally {
        await s.stop();
      }
    }
  }),
);

test(
  'with --processes 2 the fetch process serves the same profile, before and after SIGHUP',
  withPki(async (ca, dir) => {
    const c = issueCert(ca, { keyType: 'rsa' });
    const [port] = await freePorts(1);
    const state = join(dir, 'state');
    const server = await startServerProcess([
      '--bind',
      `127.0.0.1:${port}`,
      '--state-dir',
      state,
      '--processes',
      '2',
      '--tls-cert',
      c.certPath,
      '--tls-key',
      c.keyPath,
    ]);
    try {
      await waitFor('the fetch process', () => /fetch process 1 started/.test(server.stderr()), 20_000);
      // sslscan opens dozens of connections: they alternate between the two processes.
      assertProfile(await sslscan(port!, dir), 'two processes');
      const renewed = issueCert(ca, { keyType: 'rsa' });
      writeFileSync(c.certPath, renewed.cert);
      writeFileSync(c.keyPath, renewed.key);
      server.child.kill('SIGHUP');
      await waitFor('the reload', () => /reload: configuration loaded/.test(server.stderr()));
      assertProfile(await sslscan(port!, dir), 'two processes after SIGHUP');
    } finally {
      await server.stop();
    }
    assert.is(server.child.exitCode, 0, server.stderr());
  }),
);

/** One HTTPS request trusting `ca` on a fresh connection: status and headers. */
function get(
  url: string,
  ca: Buffer,
  opts: { method?: string; headers?: Record<string, string>; body?: string } = {},
): Promise<{ status: number; hsts: string | undefined; body: string }> {
  return new Promise((resolve, reject) => {
    const req = httpsRequest(
      url,
      { method: opts.method ?? 'GET', headers: opts.headers ?? {}, ca, agent: false },
      (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (d: string) => {
          body += d;
        });
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            hsts: res.headers['strict-transport-security'] as string | undefined,
            body,
          }),
        );
      },
    );
    req.on('error', reject);
    req.end(opts.body);
  });
}

test(
  'every HTTPS answer carries HSTS: Koa routes, errors, the fetch front, pages; plain HTTP carries none',
  withPki(async (ca) => {
    const c = issueCert(ca);
    const s = await startTestServer({
      config: { tlsCert: c.certPath, tlsKey: c.keyPath, rateLimitPerMinute: 60, rateLimitBurst: 8 },
    });
    try {
      const fetchBody = JSON.stringify({ op: 'fetch', code: '0A-7K3M-9QXD-W2HF-Z' });
      const answers = [
        await get(`${s.url}/v1/topology`, ca.pem, { headers: { Accept: 'application/json' } }),
        await get(`${s.url}/no/such/path`, ca.pem),
        await get(`${s.url}/v1/share`, ca.pem, {
          method: 'POST',
          headers: { 'Content-Type': 'application/json', Accept: 'application/json' },
          body: fetchBody,
        }),
        await get(`${s.url}/v1/share`, ca.pem, {
          method: 'POST',
          headers: { 'Content-Type': 'application/json' },
          body: '{not json',
        }),
        await get(`${s.url}/verify/not-a-token`, ca.pem, { headers: { Accept: 'text/html' } }),
      ];
      // Past the burst: 429 answers carry it too.
      for (let i = 0; i < 6; i++) answers.push(await get(`${s.url}/v1/topology`, ca.pem));
      const statuses = answers.map((a) => a.status);
      for (const st of [200, 404, 400, 429])
        assert.ok(statuses.includes(st), `a ${st} answer among ${statuses.join(' ')}`);
      for (const a of answers) assert.is(a.hsts, 'max-age=63072000', `HSTS on the ${a.status} answer`);
    } finally {
      await s.stop();
    }
    const plain = await startTestServer();
    try {
      const res = await new Promise<{ hsts: unknown }>((resolve, reject) => {
        httpRequest(`${plain.url}/v1/topology`, (r) => {
          r.resume();
          resolve({ hsts: r.headers['strict-transport-security'] });
        })
          .on('error', reject)
          .end();
      });
      assert.is(res.hsts, undefined, 'no HSTS over plain HTTP');
    } finally {
      await plain.stop();
    }
  }),
);

/** Opens a TCP connection, sends `bytes`, and resolves with the ms until the server closes it (capped). */
function heldFor(port: number, bytes: Buffer, capMs: number): Promise<number> {
  return new Promise((resolve) => {
    const started = Date.now();
    const socket = connect(port, '127.0.0.1', () => {
      if (bytes.length > 0) socket.write(bytes);
    });
    const cap = setTimeout(() => socket.destroy(), capMs);
    socket.on('data', () => {});
    socket.on('error', () => {});
    socket.on('close', () => {
      clearTimeout(cap);
      resolve(Date.now() - started);
    });
  });
}

test(
  'a connection that never finishes its handshake is closed at the headers deadline; plain HTTP gets 400 and one line',
  withPki(async (ca) => {
    const c = issueCert(ca);
    const headersMs = 1500;
    const s = await startTestServer({
      config: { tlsCert: c.certPath, tlsKey: c.keyPath },
      timeouts: { headersMs, checkIntervalMs: 250 },
    });
    try {
      const port = Number(new URL(s.url).port);
      // The first bytes of a ClientHello record (type 0x16, TLS 1.0 record version, length 512), and no more.
      const partialHello = Buffer.from([0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03, 0x03]);
      const [silent, partial] = await Promise.all([
        heldFor(port, Buffer.alloc(0), 10_000),
        heldFor(port, partialHello, 10_000),
      ]);
      for (const [what, ms] of [
        ['silent', silent],
        ['partial handshake', partial],
      ] as const) {
        assert.ok(
          ms >= headersMs - 100 && ms < headersMs + 1500,
          `${what} connection closed after ${ms} ms (deadline ${headersMs} ms; node's default is 120 s)`,
        );
      }

      const plain = await new Promise<{ status: number; body: string }>((resolve, reject) => {
        httpRequest(`http://127.0.0.1:${port}/v1/topology`, (r) => {
          let body = '';
          r.setEncoding('utf8');
          r.on('data', (d: string) => {
            body += d;
          });
          r.on('end', () => resolve({ status: r.statusCode ?? 0, body }));
        })
          .on('error', reject)
          .end();
      });
      assert.is(plain.status, 400);
      assert.is(plain.body, 'This port speaks HTTPS only: use an https:// URL.\n');
      // And HTTPS still works on the same port.
      assert.is((await get(`${s.url}/v1/topology`, ca.pem)).status, 200);
    } finally {
      await s.stop();
    }
  }),
);

test(
  'an expired, an expiring and a misnamed certificate start with a warning, and `status` shows names, expiry and the problem',
  withPki(async (ca, dir) => {
    const day = 86_400_000;
    const cases = [
      {
        cert: issueCert(ca, { start: new Date(Date.now() - 10 * day), end: new Date(Date.now() - day) }),
        warn: /WARN the certificate of --tls-cert \S+ expired at \S+: clients refuse it/,
      },
      {
        cert: issueCert(ca, { days: 5 }),
        warn: /WARN the certificate of --tls-cert \S+ expires at \S+ \(4 days left, under 14 days\)/,
      },
      {
        cert: issueCert(ca, { names: ['keys.example.org'] }),
        warn: /WARN the certificate of --tls-cert \S+ does not name 127\.0\.0\.1, the host of the public URL https:\/\/127\.0\.0\.1:\d+ \(it names keys\.example\.org\): clients refuse it/,
      },
    ];
    for (const { cert, warn } of cases) {
      const s = await startTestServer({ config: { tlsCert: cert.certPath, tlsKey: cert.keyPath } });
      try {
        assert.match(s.logger.text(), warn);
      } finally {
        await s.stop();
      }
    }
    const good = issueCert(ca);
    const quiet = await startTestServer({ config: { tlsCert: good.certPath, tlsKey: good.keyPath } });
    await quiet.stop();
    assert.not.match(quiet.logger.text(), /certificate/, 'a good certificate: nothing said');

    // `status` of an installed config (under a test root) asks the running server and reads the certificate it presents.
    const [port] = await freePorts(1);
    const root = join(dir, 'root');
    mkdirSync(join(root, 'etc', 'stash'), { recursive: true });
    const expired = cases[0]!.cert;
    writeFileSync(
      join(root, 'etc', 'stash', 'key-server.toml'),
      [
        `bind_addr = "127.0.0.1:${port}"`,
        `tls_cert = "${expired.certPath}"`,
        `tls_key = "${expired.keyPath}"`,
        `public_url = "https://127.0.0.1:${port}"`,
        '',
      ].join('\n'),
    );
    const s = await startTestServer({
      config: { bind: { host: '127.0.0.1', port: port! }, tlsCert: expired.certPath, tlsKey: expired.keyPath },
    });
    try {
      const st = await runServerCommand(['status'], { ...process.env, STASH_KEY_SERVER_ROOT_PREFIX: root });
      assert.match(
        st.stdout,
        /^certificate: names 127\.0\.0\.1, localhost; EXPIRED \S+; issuer CN=stash test CA; WARNING: the certificate of this server expired at/m,
      );
    } finally {
      await s.stop();
    }
    const down = await runServerCommand(['status'], { ...process.env, STASH_KEY_SERVER_ROOT_PREFIX: root });
    assert.match(down.stdout, /^server: not answering/m);
    assert.match(
      down.stdout,
      new RegExp(
        `^certificate: \\(${expired.certPath.replace(/[.]/g, '\\.')}, not served now\\) names 127\\.0\\.0\\.1, localhost; EXPIRED`,
        'm',
      ),
    );
  }),
);

test.run();
