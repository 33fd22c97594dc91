/**
 * Replication over HTTPS, as the spec requires, between real server
 * processes with certificates of a test CA they trust (NODE_EXTRA_CA_CERTS,
 * as an operator of a private CA would set it): a publish on A is confirmed
 * through B and fetched on A, so events went both ways over TLS. A third
 * peer presenting a certificate of a CA the nodes do not trust is refused:
 * nothing reaches it, and A's status names the certificate problem.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { request } from 'node:https';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fetchShare, publish } from '../../src/keyserver/client.js';
import { haveCommand, needFacility } from '../helpers/facility.js';
import { identityPublicKey, mailSink, tempDir } from './harness.js';
import { CLUSTER, TOKEN, freePorts, startServerProcess, waitFor, type ServerProcess, LIMITS_OFF } from './cluster.js';
import { issueCert, makeCa } from './test-pki.js';

function https(url: string, ca: Buffer, method = 'GET'): Promise<{ status: number; json: any }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method, ca, agent: false, headers: { Accept: 'application/json' } }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => {
        body += d;
      });
      res.on('end', () =>
        resolve({ status: res.statusCode ?? 0, json: body.startsWith('{') ? JSON.parse(body) : body }),
      );
    });
    req.on('error', reject);
    req.end();
  });
}

test('two nodes replicate both ways over HTTPS with a test CA; a peer with an untrusted certificate is refused', async () => {
  if (!needFacility(haveCommand('openssl'), 'openssl', 'needed to make a test CA (apt-get install openssl)')) return;
  const dir = tempDir('repl-https');
  const sink = mailSink();
  const servers: ServerProcess[] = [];
  try {
    const ca = makeCa(dir.path);
    const rogueCa = makeCa(dir.path, 'rogue CA');
    const [pa, pb, pc] = await freePorts(3);
    const url = (p: number) => `https://127.0.0.1:${p}`;
    const tokenFile = join(dir.path, 'token');
    writeFileSync(tokenFile, `${TOKEN}\n`, { mode: 0o600 });
    const node = (id: number, port: number, cert: ReturnType<typeof issueCert>, peers: number[]) => [
      '--bind',
      `127.0.0.1:${port}`,
      '--state-dir',
      join(dir.path, `state-${id}`),
      '--server-id',
      String(id),
      '--cluster-id',
      CLUSTER,
      '--public-url',
      url(port),
      '--topology-server',
      `0=${url(pa!)},${id === 0 ? 'active' : 'standby'}`,
      '--topology-server',
      `1=${url(pb!)},${id === 1 ? 'active' : 'standby'}`,
      '--route',
      '0=0,1',
      '--route',
      '1=1,0',
      '--replication-token-file',
      tokenFile,
      ...peers.flatMap((p) => ['--replication-peer-url', `${url(p)}/v1/replicate`]),
      '--tls-cert',
      cert.certPath,
      '--tls-key',
      cert.keyPath,
      '--verification-email-command',
      sink.command,
      ...LIMITS_OFF,
    ];
    const env = { ...process.env, NODE_EXTRA_CA_CERTS: ca.caPath };
    // A sends to B and to C; B sends to A; C only receives, with a certificate of a CA nobody here trusts.
    const [a, b, c] = await Promise.all([
      startServerProcess(node(0, pa!, issueCert(ca), [pb!, pc!]), env),
      startServerProcess(node(1, pb!, issueCert(ca), [pa!]), env),
      startServerProcess(node(2, pc!, issueCert(rogueCa), []), env),
    ]);
    servers.push(a!, b!, c!);
    assert.is(a!.url, url(pa!));

    const key = identityPublicKey();
    const pub = await publish(a!.url, key, 'tls-peer@example.org', { ca: ca.pem });
    const token = sink.lastLink('tls-peer@example.org').split('/').pop()!;
    // The open publish request travels A -> B over HTTPS: B confirms it; the confirmation travels B -> A.
    await waitFor(
      'the publish request reaches B',
      async () => (await https(`${url(pb!)}/verify/${token}`, ca.pem, 'POST')).status === 200,
      20_000,
    );
    let fetched: Awaited<ReturnType<typeof fetchShare>> | undefined;
    await waitFor(
      'the confirmation reaches A',
      async () => {
        fetched = await fetchShare(a!.url, pub.code, { ca: ca.pem }).catch(() => undefined);
        return fetched !== undefined;
      },
      20_000,
    );
    assert.equal(fetched!.publicKey, key);

    const statusOf = async (port: number, trust: Buffer) => (await https(`${url(port)}/v1/status`, trust)).json;
    await waitFor(
      'A -> B drains',
      async () =>
        (await statusOf(pa!, ca.pem)).replication_peers.find((p: { url: string }) => p.url.includes(`:${pb}/`))
          .pending === 0,
      20_000,
    );
    const sa = await statusOf(pa!, ca.pem);
    const toB = sa.replication_peers.find((p: { url: string }) => p.url.includes(`:${pb}/`));
    const toC = sa.replication_peers.find((p: { url: string }) => p.url.includes(`:${pc}/`));
    assert.is(toB.last_error, null);
    assert.ok(toB.sent_events > 0);
    assert.ok(toC.pending > 0, 'the untrusted peer got nothing');
    assert.is(toC.sent_events, 0);
    assert.match(
      toC.last_error,
      /refused the peer's certificate \((UNABLE_TO_VERIFY_LEAF_SIGNATURE|SELF_SIGNED_CERT_IN_CHAIN|UNABLE_TO_GET_ISSUER_CERT_LOCALLY):.*nothing was sent/,
    );
    assert.match(
      a!.stderr(),
      new RegExp(`replication: sending to ${url(pc!)}/v1/replicate failed: .*refused the peer's certificate`),
    );
    const sc = await statusOf(pc!, rogueCa.pem);
    assert.is(sc.shares_live + sc.shares_pending, 0, 'the untrusted peer holds no share');
    const sb = await statusOf(pb!, ca.pem);
    assert.is(sb.shares_live, 1);
  } finally {
    await Promise.all(servers.map((s) => s.stop()));
    sink.remove();
    dir.remove();
  }
  for (const s of servers) assert.is(s.child.exitCode, 0, s.stderr());
});

test.run();
