/**
 * `resync-peer` as a real process: it reads a running server's state folder
 * (without its lock) and streams every live share and pending verification to
 * another server; afterwards both hold the same live set, a pending link can
 * be confirmed on the peer, and a second run changes nothing. Wrong tokens and
 * missing options fail with clear messages.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { publish } from '../../src/keyserver/client.js';
import { parseShareCode } from '../../src/keyserver/share-code.js';
import { http, identityPublicKey, startTestServer, type TestServer } from './harness.js';
import { CLUSTER, TOKEN, freePorts, replicateUrl, ringConfig, runServerCommand } from './cluster.js';

const key = identityPublicKey();

const resyncArgs = (from: TestServer, peerPort: number, token = TOKEN) => [
  'resync-peer',
  '--peer-url',
  replicateUrl(peerPort),
  '--state-dir',
  from.stateDir,
  '--server-id',
  String(from.config.serverId),
  '--cluster-id',
  CLUSTER,
  '--replication-token',
  token,
];

test("resync-peer streams live shares and pending verifications from a running server's folder; a second run changes nothing", async () => {
  const ports = await freePorts(2);
  // Two nodes of one cluster that do not replicate on their own (no peer URLs).
  const [a, b] = await Promise.all(
    [0, 1].map((i) => startTestServer({ config: ringConfig(i, ports, { replicationPeerUrls: [] }) })),
  );
  try {
    const codes: string[] = [];
    for (let i = 0; i < 5; i++) {
      const email = `u${i}@example.org`;
      codes.push((await publish(a!.url, key, email)).code);
      if (i < 4) assert.is((await http(a!.sink.lastLink(email), { method: 'POST' })).status, 200);
    }
    const onlyB = (await publish(b!.url, key, 'b-only@example.org')).code;
    assert.equal(b!.store.liveCodes(), [parseShareCode(onlyB).canonical]);

    const first = await runServerCommand(resyncArgs(a!, ports[1]!));
    assert.is(first.code, 0, first.stderr);
    assert.match(
      first.stdout,
      /resync-peer: sent 5 share\(s\) \(1 pending verification\) and 0 tombstone\(s\) .* \(server 1\) in 1 batch\(es\): 5 applied, 0 already there/,
    );
    const expected = [...codes.map((c) => parseShareCode(c).canonical), parseShareCode(onlyB).canonical].sort();
    assert.equal(b!.store.liveCodes(), expected);
    assert.is(b!.store.lookup(parseShareCode(codes[4]!).canonical).state, 'pending');
    // The pending publish was replicated with its token: its link works on B.
    const token = a!.sink.lastLink('u4@example.org').split('/').pop()!;
    assert.is((await http(`${b!.url}/verify/${token}`, { method: 'POST' })).status, 200);
    assert.is(b!.store.lookup(parseShareCode(codes[4]!).canonical).state, 'live');

    const second = await runServerCommand(resyncArgs(a!, ports[1]!));
    assert.is(second.code, 0, second.stderr);
    assert.match(second.stdout, /: 0 applied, 5 already there/);
    // The other direction: B's own share reaches A, then both hold the same live set.
    const back = await runServerCommand(resyncArgs(b!, ports[0]!));
    assert.is(back.code, 0, back.stderr);
    assert.equal(a!.store.liveCodes(), b!.store.liveCodes());
  } finally {
    await Promise.all([a!.stop(), b!.stop()]);
  }
});

test('resync-peer refuses without a token, and reports a wrong one as ReplicationUnauthorized', async () => {
  const ports = await freePorts(2);
  const b = await startTestServer({ config: ringConfig(1, ports, { replicationPeerUrls: [] }) });
  const a = await startTestServer({ config: ringConfig(0, ports, { replicationPeerUrls: [] }) });
  try {
    const wrong = await runServerCommand(resyncArgs(a, ports[1]!, 'not-the-cluster-token-at-all'));
    assert.is(wrong.code, 77, wrong.stderr);
    assert.match(wrong.stderr, /ReplicationUnauthorized/);
    assert.not.match(wrong.stderr, /not-the-cluster-token/, 'the token is never printed');
    const none = await runServerCommand([
      'resync-peer',
      '--peer-url',
      replicateUrl(ports[1]!),
      '--state-dir',
      a.stateDir,
    ]);
    assert.is(none.code, 64);
    assert.match(none.stderr, /resync-peer needs --replication-token/);
    const missing = await runServerCommand(['resync-peer', '--state-dir', a.stateDir]);
    assert.is(missing.code, 64);
    assert.match(missing.stderr, /resync-peer needs --peer-url/);
  } finally {
    await Promise.all([a.stop(), b.stop()]);
  }
});

test.run();
