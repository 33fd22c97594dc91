/**
 * HTTPS with a test CA made by openssl at test time (no private key is
 * committed): a client that trusts the CA works (by `ca`, and by
 * NODE_EXTRA_CA_CERTS in a child process); one that does not is refused.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { execFileSync, spawn } from 'node:child_process';
import { writeFileSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fetchShare, publish, topology } from '../../src/keyserver/client.js';
import { haveCommand, needFacility } from '../helpers/facility.js';
import { identityPublicKey, startTestServer, tempDir, tsxNodeArgs } from './harness.js';

const key = identityPublicKey();

function makeCa(dir: string): { ca: string; cert: string; key: string; otherCa: string } {
  const run = (...args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] });
  run(
    'req',
    '-x509',
    '-newkey',
    'ec',
    '-pkeyopt',
    'ec_paramgen_curve:prime256v1',
    '-nodes',
    '-keyout',
    'ca.key',
    '-out',
    'ca.pem',
    '-days',
    '2',
    '-subj',
    '/CN=stash test CA',
  );
  run(
    'req',
    '-newkey',
    'ec',
    '-pkeyopt',
    'ec_paramgen_curve:prime256v1',
    '-nodes',
    '-keyout',
    'server.key',
    '-out',
    'server.csr',
    '-subj',
    '/CN=127.0.0.1',
  );
  writeFileSync(join(dir, 'ext.cnf'), 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n');
  run(
    'x509',
    '-req',
    '-in',
    'server.csr',
    '-CA',
    'ca.pem',
    '-CAkey',
    'ca.key',
    '-CAcreateserial',
    '-out',
    'server.pem',
    '-days',
    '2',
    '-extfile',
    'ext.cnf',
  );
  run(
    'req',
    '-x509',
    '-newkey',
    'ec',
    '-pkeyopt',
    'ec_paramgen_curve:prime256v1',
    '-nodes',
    '-keyout',
    'other.key',
    '-out',
    'other.pem',
    '-days',
    '2',
    '-subj',
    '/CN=another CA',
  );
  return {
    ca: join(dir, 'ca.pem'),
    cert: join(dir, 'server.pem'),
    key: join(dir, 'server.key'),
    otherCa: join(dir, 'other.pem'),
  };
}

test('HTTPS with a test CA: verified clients work, unverified ones are refused', async () => {
  if (!needFacility(haveCommand('openssl'), 'openssl', 'needed to make a test CA (apt-get install openssl)')) return;
  const dir = tempDir('tls');
  try {
    const pki = makeCa(dir.path);
    const s = await startTestServer({ config: { tlsCert: pki.cert, tlsKey: pki.key } });
    try {
      assert.match(s.url, /^https:\/\/127\.0\.0\.1:\d+$/);
      const ca = readFileSync(pki.ca);
      const pub = await publish(s.url, key, 'tls@example.org', { ca });
      assert.is(pub.verification, 'sent');
      const link = s.sink.lastLink('tls@example.org');
      assert.ok(link.startsWith(`${s.url}/verify/`), 'the link uses https');
      const t = await topology(s.url, { ca });
      assert.is(t.servers[0]!.url, s.url);

      // No trust in the test CA, or trust in another CA: refused as untrusted.
      for (const opts of [{}, { ca: readFileSync(pki.otherCa) }]) {
        try {
          await topology(s.url, opts);
          assert.unreachable('an unverified server was accepted');
        } catch (err) {
          assert.is((err as { code?: string }).code, 'SERVER_UNTRUSTED', (err as Error).message);
        }
      }
      // Plain HTTP to the TLS port: an error, not a hang.
      try {
        await topology(s.url.replace('https:', 'http:'), { timeoutMs: 3000 });
        assert.unreachable();
      } catch (err) {
        assert.ok(
          ['SERVER_UNREACHABLE', 'SERVER_PROTOCOL'].includes((err as { code: string }).code),
          (err as Error).message,
        );
      }

      // A child process that only has NODE_EXTRA_CA_CERTS (what the CLI relies on).
      const script = join(dir.path, 'confirm-and-fetch.mts');
      const clientUrl = new URL('../../src/keyserver/client.ts', import.meta.url).href;
      writeFileSync(
        script,
        [
          `import { fetchShare } from ${JSON.stringify(clientUrl)};`,
          `import { request } from 'node:https';`,
          `await new Promise((ok, bad) => request(${JSON.stringify(link)}, { method: 'POST' }, (r) => { r.resume(); r.on('end', ok); }).on('error', bad).end());`,
          `const f = await fetchShare(${JSON.stringify(s.url)}, ${JSON.stringify(pub.code)});`,
          'console.log(JSON.stringify({ email: f.email, count: f.fetchCount }));',
        ].join('\n'),
      );
      const [node, ...prefix] = tsxNodeArgs;
      // Asynchronous: the server runs in this process and must keep answering.
      const child = await new Promise<{ status: number | null; stdout: string; stderr: string }>((resolve) => {
        const p = spawn(node!, [...prefix, script], { env: { ...process.env, NODE_EXTRA_CA_CERTS: pki.ca } });
        let stdout = '';
        let stderr = '';
        p.stdout.on('data', (d) => {
          stdout += d;
        });
        p.stderr.on('data', (d) => {
          stderr += d;
        });
        const timer = setTimeout(() => p.kill('SIGKILL'), 30_000);
        p.on('close', (status) => {
          clearTimeout(timer);
          resolve({ status, stdout, stderr });
        });
      });
      assert.is(child.status, 0, child.stderr);
      assert.equal(JSON.parse(child.stdout.trim()), { email: 'tls@example.org', count: 1 });
      const again = await fetchShare(s.url, pub.code, { ca });
      assert.is(again.fetchCount, 2);
    } finally {
      await s.stop();
    }
  } finally {
    dir.remove();
  }
});

test('a missing certificate file is a configuration error naming the option', async () => {
  try {
    await startTestServer({ config: { tlsCert: '/nonexistent/cert.pem', tlsKey: '/nonexistent/key.pem' } });
    assert.unreachable();
  } catch (err) {
    assert.is((err as { code?: string }).code, 'CONFIG');
    assert.match((err as Error).message, /--tls-cert \/nonexistent\/cert\.pem: cannot read the file \(ENOENT\)/);
  }
});

test.run();
