/**
 * Replication between real servers on loopback: both ways in a pair, along a
 * ring of three, HMAC refusals (wrong token, tampered body, stale timestamp,
 * replay, other cluster, unknown peer), merge rules (a tombstone outlives a
 * late put; re-applying changes nothing) and the durable outbound queue
 * across a restart with the peer down.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { fetchShare, publish, status } from '../../src/keyserver/client.js';
import { encodeBatch, type ReplicateBatch } from '../../src/keyserver/replication/batch.js';
import { parseShareCode } from '../../src/keyserver/share-code.js';
import { ManualClock, http, identityPublicKey, startTestServer, tempDir, type TestServer } from './harness.js';
import { CLUSTER, freePorts, postSigned, ringConfig, waitFor } from './cluster.js';
import { connect } from 'node:net';

/** Writes `request` on a fresh connection and resolves with what comes back first (bounded by 5 s). */
function rawExchange(base: string, request: string): Promise<string> {
  const { hostname, port } = new URL(base);
  return new Promise((resolve, reject) => {
    const sock = connect(Number(port), hostname, () => sock.write(request));
    const timer = setTimeout(() => {
      sock.destroy();
      resolve('');
    }, 5000);
    sock.once('data', (d) => {
      clearTimeout(timer);
      sock.destroy();
      resolve(d.toString('latin1'));
    });
    sock.once('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
  });
}

const key = identityPublicKey();
const fast = { minBackoffMs: 50, maxBackoffMs: 300, timeoutMs: 2000 };

async function startRing(n: number): Promise<TestServer[]> {
  const ports = await freePorts(n);
  return Promise.all(ports.map((_p, i) => startTestServer({ config: ringConfig(i, ports), replication: fast })));
}

async function stopAll(servers: Array<TestServer | undefined>): Promise<void> {
  await Promise.all(servers.map((s) => s?.stop()));
}

/** Publishes on `s` and confirms the link on `confirmOn` (another node may finish the verification). */
async function publishVerified(s: TestServer, email: string, confirmOn: TestServer = s): Promise<string> {
  const pub = await publish(s.url, key, email);
  const token = s.sink.lastLink(email).split('/').pop()!;
  if (confirmOn !== s)
    await waitFor(
      `${email} replicated before confirming`,
      () => confirmOn.store.lookup(parseShareCode(pub.code).canonical).state === 'pending',
    );
  const res = await http(`${confirmOn.url}/verify/${token}`, { method: 'POST' });
  assert.is(res.status, 200, `confirmation of ${email} on ${confirmOn.url}`);
  return pub.code;
}

const holds = (s: TestServer, code: string, state = 'live') =>
  s.store.lookup(parseShareCode(code).canonical).state === state;

test('two nodes replicate both ways: publish, verification on the other node, fetch counts, status drains to 0', async () => {
  const [a, b] = await startRing(2);
  try {
    // Published on A, confirmed through B: the open publish request and its token travelled.
    const fromA = await publishVerified(a!, 'alice@example.org', b!);
    await waitFor('verification reaches A', () => holds(a!, fromA));
    const fetched = await fetchShare(a!.url, fromA);
    assert.equal(fetched.publicKey, key);
    assert.is(fetched.fetchCount, 1);
    await waitFor('fetch count reaches B', () => {
      const l = b!.store.lookup(parseShareCode(fromA).canonical);
      return l.state === 'live' && l.share.fetchCount === 1;
    });

    const fromB = await publishVerified(b!, 'bob@example.org');
    await waitFor('B share reaches A', () => holds(a!, fromB));
    assert.equal(a!.store.liveCodes(), b!.store.liveCodes());

    await waitFor(
      'queues drain',
      async () => (await status(a!.url)).replication_pending === 0 && (await status(b!.url)).replication_pending === 0,
    );
    const sa = await status(a!.url);
    assert.ok(sa.replication_last_sequence >= 2, 'A stamped its publish and fetch count');
    const json = (await http(`${a!.url}/v1/status`, { headers: { Accept: 'application/json' } })).json();
    assert.is(json.replication_pending, 0);
    assert.is(json.replication_peers.length, 1);
    const peer = json.replication_peers[0];
    assert.is(peer.server_id, 1);
    assert.is(peer.pending, 0);
    assert.is(peer.lag_sequences, 0, 'B acknowledged every event A stamped');
    assert.is(peer.acked_sequence, json.replication_last_sequence);
    assert.is(peer.last_error, null);
  } finally {
    await stopAll([a, b]);
  }
});

test('three nodes form a ring: every share reaches every node, nothing circulates forever', async () => {
  const nodes = await startRing(3);
  try {
    const codes: string[] = [];
    for (const [i, n] of nodes.entries()) codes.push(await publishVerified(n, `user${i}@example.org`));
    await waitFor('all nodes hold all shares', () => nodes.every((n) => codes.every((c) => holds(n, c))));
    await waitFor('queues drain', async () =>
      (await Promise.all(nodes.map((n) => status(n.url)))).every((s) => s.replication_pending === 0),
    );
    // A's events reach C through B and stop there: C does not send them back to A (their origin).
    const sentBy = nodes.map((n) => n.replicator!.peers()[0]!.sent_events);
    await new Promise((r) => setTimeout(r, 300));
    assert.equal(
      nodes.map((n) => n.replicator!.peers()[0]!.sent_events),
      sentBy,
      'quiet once converged',
    );
    // Each share: a pending put and a verification at the origin, forwarded once: at most 2 events x 2 hops.
    assert.ok(sentBy.reduce((x, y) => x + y, 0) <= codes.length * 2 * 2, `events sent: ${sentBy}`);
    for (const n of nodes) assert.equal(n.store.liveCodes(), [...codes].map((c) => parseShareCode(c).canonical).sort());
  } finally {
    await stopAll(nodes);
  }
});

/** A lone server 0 that makes real events, and node 1 of a pair that receives them (no outbound peer). */
async function sourceAndTarget(): Promise<{ source: TestServer; target: TestServer }> {
  const source = await startTestServer({ config: { serverId: 0 } });
  const ports = await freePorts(2);
  const target = await startTestServer({ config: { ...ringConfig(1, ports), replicationPeerUrls: [] } });
  return { source, target };
}

function batchFor(server: TestServer, code: string, extra: Partial<ReplicateBatch> = {}): Buffer {
  const ev = server.store.eventFor({ kind: 'share', code: parseShareCode(code).canonical })!;
  return encodeBatch({
    clusterId: CLUSTER,
    sender: 0,
    stream: Date.now(),
    batchSeq: 1,
    flags: 0,
    events: [ev],
    ...extra,
  });
}

test('HMAC: wrong token, tampered body, stale time, replay, other cluster and unknown peers are refused; nothing is applied', async () => {
  const { source, target } = await sourceAndTarget();
  try {
    const code = (await publish(source.url, key, 'carol@example.org')).code;
    const body = batchFor(source, code);
    const before = target.store.stats().sharesLive;
    const refused = async (res: Awaited<ReturnType<typeof http>>, status: number, codeName: string) => {
      assert.is(res.status, status, res.text);
      assert.is(res.json().error.code, codeName);
      assert.is(target.store.stats().sharesLive, before, 'nothing applied');
    };

    const wrong = await postSigned(target.url, body, { token: 'another-token-0123456789abcdef' });
    await refused(wrong, 401, 'REPLICATION_UNAUTHORIZED');
    assert.match(wrong.json().error.message, /ReplicationUnauthorized/);
    await refused(
      await http(`${target.url}/v1/replicate`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/vnd.stash.v1+binary', Accept: 'application/json' },
        body,
      }),
      401,
      'REPLICATION_UNAUTHORIZED',
    );
    await refused(
      await postSigned(target.url, body, {
        mutate: (_h, b) => {
          const t = Buffer.from(b);
          t[t.length - 9]! ^= 1;
          return t;
        },
      }),
      401,
      'REPLICATION_UNAUTHORIZED',
    );
    await refused(
      await postSigned(target.url, body, {
        mutate: (h, b) => {
          h['x-stash-timestamp'] = String(Number(h['x-stash-timestamp']) + 1);
          return b;
        },
      }),
      401,
      'REPLICATION_UNAUTHORIZED',
    );
    await refused(await postSigned(target.url, body, { nowMs: Date.now() - 10 * 60_000 }), 401, 'REPLICATION_STALE');
    await refused(
      await postSigned(target.url, batchFor(source, code, { clusterId: 'elsewhere' }), { clusterId: 'elsewhere' }),
      403,
      'REPLICATION_FORBIDDEN',
    );
    await refused(await postSigned(target.url, batchFor(source, code, { sender: 7 })), 403, 'REPLICATION_FORBIDDEN');
    const self = await postSigned(target.url, batchFor(source, code, { sender: 1 }));
    await refused(self, 403, 'REPLICATION_FORBIDDEN');
    assert.match(self.json().error.message, /this server's own id \(resync-peer needs the --server-id/);

    // The good request is applied once; the same request again is a replay.
    const headersSeen: Record<string, string> = {};
    const ok = await postSigned(target.url, body, {
      mutate: (h, b) => {
        Object.assign(headersSeen, h);
        return b;
      },
    });
    assert.is(ok.status, 200, ok.text);
    assert.equal(ok.json(), { server_id: 1, applied: 1, unchanged: 0 });
    assert.is(target.store.stats().sharesLive, before + 1);
    const replay = await http(`${target.url}/v1/replicate`, { method: 'POST', headers: headersSeen, body });
    assert.is(replay.status, 409, replay.text);
    assert.is(replay.json().error.code, 'REPLICATION_REPLAY');
    // A fresh request with the same event: accepted, changes nothing.
    const again = await postSigned(target.url, batchFor(source, code, { batchSeq: 2 }));
    assert.equal(again.json(), { server_id: 1, applied: 0, unchanged: 1 });
    assert.is(target.store.stats().sharesLive, before + 1);
  } finally {
    await stopAll([source, target]);
  }
});

test('a tombstone outlives a late put; last writer wins but a verification is never undone', async () => {
  const { source, target } = await sourceAndTarget();
  try {
    const code = (await publish(source.url, key, 'dave@example.org')).code;
    const canonical = parseShareCode(code).canonical;
    const put = source.store.eventFor({ kind: 'share', code: canonical })!;
    assert.is(put.type, 'putShare');
    if (put.type !== 'putShare') return;
    const verified = {
      ...put,
      stamp: { ...put.stamp, seq: put.stamp.seq + 5 },
      share: {
        ...put.share,
        verifiedAt: Date.now(),
        tokenHash: undefined,
        stamp: { ...put.stamp, seq: put.stamp.seq + 5 },
      },
    };
    let seq = 0;
    const send = (events: ReplicateBatch['events']) =>
      postSigned(
        target.url,
        encodeBatch({ clusterId: CLUSTER, sender: 0, stream: 1, batchSeq: ++seq, flags: 0, events }),
      );
    // Verified first, the older pending put later: still verified.
    assert.is((await send([verified])).json().applied, 1);
    assert.is((await send([put])).json().applied, 0);
    assert.is(target.store.lookup(canonical).state, 'live');
    const tomb = {
      type: 'tombstone' as const,
      stamp: { ...put.stamp, seq: put.stamp.seq + 6 },
      code: canonical,
      deletedAt: Date.now(),
      expiresAt: put.share.expiresAt,
      reason: 'deleted' as const,
    };
    assert.is((await send([tomb])).json().applied, 1);
    // A put with a later stamp arrives after the tombstone: the share stays deleted.
    const late = {
      ...verified,
      stamp: { ...put.stamp, seq: put.stamp.seq + 50 },
      share: { ...verified.share, stamp: { ...put.stamp, seq: put.stamp.seq + 50 } },
    };
    assert.is((await send([late])).json().applied, 0);
    assert.is(target.store.lookup(canonical).state, 'expired');
  } finally {
    await stopAll([source, target]);
  }
});

test('durable queue: peer down, origin restarted, peer up: the pending events arrive', async () => {
  const ports = await freePorts(2);
  const state = tempDir('durable');
  let a: TestServer | undefined = await startTestServer({
    config: ringConfig(0, ports),
    stateDir: state.path,
    replication: fast,
  });
  let b: TestServer | undefined;
  try {
    const codes = [await publishVerified(a, 'erin@example.org'), await publishVerified(a, 'frank@example.org')];
    await waitFor('A notices the peer is down', () => a!.replicator!.peers()[0]!.last_error !== null);
    assert.ok((await status(a.url)).replication_pending >= 2);
    await a.stop();
    a = await startTestServer({ config: ringConfig(0, ports), stateDir: state.path, replication: fast });
    assert.ok((await status(a.url)).replication_pending >= 2, 'pending survived the restart');
    b = await startTestServer({ config: ringConfig(1, ports), replication: fast });
    await waitFor('B receives both shares', () => codes.every((c) => holds(b!, c)));
    await waitFor('A drains', async () => (await status(a!.url)).replication_pending === 0);
    assert.equal(a.store.liveCodes(), b.store.liveCodes());
    // After another restart nothing is resent: the acknowledgement was durable too.
    await a.stop();
    a = await startTestServer({ config: ringConfig(0, ports), stateDir: state.path, replication: fast });
    assert.is((await status(a.url)).replication_pending, 0);
  } finally {
    await stopAll([a, b]);
    state.remove();
  }
});

test('a sender restarted with a fixed origin_epoch is not refused as a replay by its peer', async () => {
  // origin_epoch may be fixed in the config file; the batch stream must still be new after a restart,
  // or the peer, which remembers each stream's highest batch, refuses batches 1..N as replays.
  const ports = await freePorts(2);
  const state = tempDir('fixed-epoch');
  const configA = { ...ringConfig(0, ports), originEpoch: 1_700_000_000_000 };
  let a: TestServer | undefined = await startTestServer({ config: configA, stateDir: state.path, replication: fast });
  const b = await startTestServer({ config: ringConfig(1, ports), replication: fast });
  try {
    for (let i = 0; i < 4; i++) {
      const code = await publishVerified(a, `epoch${i}@example.org`);
      await waitFor(`share ${i} reaches B`, () => holds(b, code));
    }
    await waitFor('A drains', async () => (await status(a!.url)).replication_pending === 0);
    await a.stop();
    a = await startTestServer({ config: configA, stateDir: state.path, replication: fast });
    const after = await publishVerified(a, 'after-restart@example.org');
    await waitFor('the publish after the restart reaches B at once', () => holds(b, after), 2_000).catch((err) => {
      throw new Error(`${(err as Error).message}; A's peer status: ${JSON.stringify(a!.replicator!.peers()[0])}`);
    });
    assert.not.match(a.logger.text(), /REPLICATION_REPLAY/, 'no batch of the restarted sender was refused as a replay');
  } finally {
    await stopAll([a, b]);
    state.remove();
  }
});

test('an expiry on one node reaches the other as a tombstone', async () => {
  const ports = await freePorts(2);
  const clock = new ManualClock(Date.now());
  const [a, b] = await Promise.all(
    [0, 1].map((i) => startTestServer({ config: ringConfig(i, ports), clock, replication: fast })),
  );
  try {
    const code = await publishVerified(a!, 'ivan@example.org');
    await waitFor('B holds the share', () => holds(b!, code));
    clock.advance(16 * 60_000);
    assert.is(await a!.store.sweep(), 1, 'A tombstones the expired share');
    // B has not swept (no timer in tests): the tombstone it holds came from A.
    await waitFor('the tombstone reaches B', () => b!.store.stats().sharesLive === 0);
    assert.is(b!.store.lookup(parseShareCode(code).canonical).state, 'expired');
    assert.is(await b!.store.sweep(), 0, 'nothing left for B to expire');
  } finally {
    await stopAll([a, b]);
  }
});

test("refused replication attempts count against the caller's address; signed traffic does not", async () => {
  const ports = await freePorts(2);
  const target = await startTestServer({
    config: { ...ringConfig(1, ports), replicationPeerUrls: [], rateLimitPerMinute: 1, rateLimitBurst: 3 },
  });
  try {
    let seq = 0;
    const good = () =>
      postSigned(
        target.url,
        encodeBatch({ clusterId: CLUSTER, sender: 0, stream: 1, batchSeq: ++seq, flags: 0, events: [] }),
      );
    for (let i = 0; i < 6; i++) assert.is((await good()).status, 200, 'a peer is never rate limited');
    const bad = () =>
      postSigned(
        target.url,
        encodeBatch({ clusterId: CLUSTER, sender: 0, stream: 1, batchSeq: ++seq, flags: 0, events: [] }),
        { token: 'wrong-token-wrong-token-wrong' },
      );
    const statuses = [];
    for (let i = 0; i < 5; i++) statuses.push((await bad()).status);
    assert.equal(statuses, [401, 401, 401, 429, 429]);
    // Exhausted: the next POST is turned away before its body is read. Only the head of a 1 MB body is sent:
    // a server that waited for the rest would answer only at its body timeout.
    const started = Date.now();
    const head = await rawExchange(
      target.url,
      `POST /v1/replicate HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\nContent-Length: 1000000\r\n\r\n`,
    );
    assert.match(head, /^HTTP\/1\.1 429 /, head);
    assert.ok(Date.now() - started < 2000, 'answered without waiting for the body');
  } finally {
    await target.stop();
  }
});

test('other methods on /v1/replicate count against the request limit like any request', async () => {
  const ports = await freePorts(2);
  const target = await startTestServer({
    config: { ...ringConfig(1, ports), replicationPeerUrls: [], rateLimitPerMinute: 1, rateLimitBurst: 3 },
  });
  try {
    const statuses = [];
    for (const method of ['GET', 'PUT', 'DELETE', 'GET', 'PUT'])
      statuses.push((await http(`${target.url}/v1/replicate`, { method })).status);
    assert.equal(statuses, [405, 405, 405, 429, 429]);
  } finally {
    await target.stop();
  }
});

test.run();
