/**
 * GET /v1/status: replication_pending and replication_last_sequence for
 * everyone; the rest only on loopback or with a request signed by the
 * replication token. Remote callers are simulated through --trust-proxy
 * (the client address is then the last X-Forwarded-For entry).
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { status } from '../../src/keyserver/client.js';
import { signatureHeaders, statusSignatureHeaders } from '../../src/keyserver/replication/signature.js';
import { decodeStatus } from '../../src/keyserver/wire/messages.js';
import { http, startTestServer } from './harness.js';

const TOKEN = 'status-test-token-0123456789';
const remote = { 'X-Forwarded-For': '203.0.113.7' };
const json = { Accept: 'application/json' };

test('a remote caller gets only replication_pending and replication_last_sequence, in JSON and binary', async () => {
  const s = await startTestServer({ config: { trustProxy: true, replicationToken: TOKEN, clusterId: 'eu' } });
  try {
    const j = await http(`${s.url}/v1/status`, { headers: { ...json, ...remote } });
    assert.is(j.status, 200);
    assert.equal(Object.keys(j.json()).sort(), ['replication_last_sequence', 'replication_pending']);
    const bin = await http(`${s.url}/v1/status`, { headers: remote });
    assert.is(bin.body[2], 2, 'two fields on the wire');
    const d = decodeStatus(bin.body, (m) => new Error(m));
    assert.is(d.shares_live, 0);
    assert.is(d.server_id, 0);
    // An IPv6 client, and a forged loopback entry before the proxy's own, are remote too.
    assert.is(
      Object.keys((await http(`${s.url}/v1/status`, { headers: { ...json, 'X-Forwarded-For': '2001:db8::1' } })).json())
        .length,
      2,
    );
    assert.is(
      Object.keys(
        (
          await http(`${s.url}/v1/status`, { headers: { ...json, 'X-Forwarded-For': '127.0.0.1, 203.0.113.7' } })
        ).json(),
      ).length,
      2,
    );
    // Loopback (no X-Forwarded-For: the socket's address) sees everything.
    const local = (await http(`${s.url}/v1/status`, { headers: json })).json();
    assert.ok('shares_live' in local && 'replication_peers' in local && 'store_skipped' in local);
  } finally {
    await s.stop();
  }
});

test('a request signed with the replication token gets everything from anywhere; a bad, stale or replication signature is refused', async () => {
  const s = await startTestServer({ config: { trustProxy: true, replicationToken: TOKEN, clusterId: 'eu' } });
  try {
    const signed = statusSignatureHeaders(TOKEN, 'eu', Date.now());
    const full = await http(`${s.url}/v1/status`, { headers: { ...json, ...remote, ...signed } });
    assert.is(full.status, 200);
    assert.ok('shares_live' in full.json() && 'uptime_seconds' in full.json() && 'replication_peers' in full.json());
    const viaClient = await status(s.url, { headers: remote, sign: { token: TOKEN, clusterId: 'eu' } });
    assert.is(viaClient.origin_epoch, s.config.originEpoch, 'the client signs too');

    const refused = async (headers: Record<string, string>) => {
      const res = await http(`${s.url}/v1/status`, { headers: { ...json, ...remote, ...headers } });
      return [res.status, res.json().error?.code];
    };
    assert.equal(await refused(statusSignatureHeaders('another-token-0123456789', 'eu', Date.now())), [
      401,
      'REPLICATION_UNAUTHORIZED',
    ]);
    assert.equal(await refused(statusSignatureHeaders(TOKEN, 'other', Date.now())), [401, 'REPLICATION_UNAUTHORIZED']);
    assert.equal(await refused(statusSignatureHeaders(TOKEN, 'eu', Date.now() - 6 * 60_000)), [
      401,
      'REPLICATION_STALE',
    ]);
    assert.equal(
      await refused(signatureHeaders(TOKEN, 'eu', new Uint8Array(0), Date.now())),
      [401, 'REPLICATION_UNAUTHORIZED'],
      'a replication signature is not a status one',
    );
  } finally {
    await s.stop();
  }
  const noToken = await startTestServer({ config: { trustProxy: true } });
  try {
    const res = await http(`${noToken.url}/v1/status`, {
      headers: { ...json, ...remote, ...statusSignatureHeaders(TOKEN, 'default', Date.now()) },
    });
    assert.is(res.status, 401);
  } finally {
    await noToken.stop();
  }
});

test.run();
