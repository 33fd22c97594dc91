/**
 * Topology and routing on real servers: GET /v1/topology in both encodings,
 * a server answers fetches from its store only for the owners it is primary
 * or promoted for, passes the others on to the owner's servers (421 naming
 * where to go when it cannot), and the client follows the routes.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { fetchShare, publish, topology } from '../../src/keyserver/client.js';
import { fetchAlongRoute } from '../../src/keyserver/routed-fetch.js';
import { generateShareCode, parseShareCode } from '../../src/keyserver/share-code.js';
import { http, identityPublicKey, postJson, startTestServer, type TestServer } from './harness.js';
import { CLUSTER, baseUrl, freePorts, ringConfig, waitFor } from './cluster.js';

const key = identityPublicKey();
const fast = { minBackoffMs: 50, maxBackoffMs: 300, timeoutMs: 2000 };

async function verified(s: TestServer, email: string): Promise<string> {
  const code = (await publish(s.url, key, email)).code;
  assert.is((await http(s.sink.lastLink(email), { method: 'POST' })).status, 200);
  return code;
}

test('GET /v1/topology: cluster id, version, servers with status, routes (JSON and binary)', async () => {
  const ports = await freePorts(2);
  const a = await startTestServer({ config: ringConfig(0, ports, { topologyVersion: 7, replicationPeerUrls: [] }) });
  try {
    const json = (await http(`${a.url}/v1/topology`, { headers: { Accept: 'application/json' } })).json();
    assert.equal(json, {
      cluster_id: CLUSTER,
      topology_version: 7,
      server_id: 0,
      servers: [
        { id: 0, url: baseUrl(ports[0]!), status: 'active' },
        { id: 1, url: baseUrl(ports[1]!), status: 'standby' },
      ],
      routes: [
        { owner: 0, primary: 0, failovers: [1] },
        { owner: 1, primary: 1, failovers: [0] },
      ],
      promoted_owners: [],
    });
    const bin = await topology(a.url);
    assert.equal(bin, {
      clusterId: CLUSTER,
      topologyVersion: 7,
      serverId: 0,
      servers: bin.servers,
      routes: bin.routes,
      promotedOwners: [],
    });
    assert.equal(
      bin.servers.map((s) => s.status),
      ['active', 'standby'],
    );
    assert.equal(bin.routes[1], { owner: 1, primary: 1, failovers: [0] });
  } finally {
    await a.stop();
  }
});

test("a fetch is served by the owner's primary; the standby passes it on there; the routed client goes there first", async () => {
  const ports = await freePorts(2);
  const [a, b] = await Promise.all(
    [0, 1].map((i) => startTestServer({ config: ringConfig(i, ports), replication: fast })),
  );
  try {
    const code = await verified(a!, 'grace@example.org');
    assert.is(parseShareCode(code).primary, 0, "A's codes name owner 0");
    assert.is(parseShareCode(code).secondary, 1, 'and B as its ring successor');
    await waitFor('B holds the replica', () => b!.store.lookup(parseShareCode(code).canonical).state === 'live');
    const forwarded = await postJson(b!.url, { op: 'fetch', code });
    assert.is(forwarded.status, 200, "B forwards the fetch to owner 0's primary");
    assert.is(forwarded.json().email, 'grace@example.org');
    // What B answers itself (as to a request another server forwarded): not its owner, 421 naming the primary.
    const refused = await postJson(b!.url, { op: 'fetch', code }, '/v1/share', { 'X-Stash-Forwarded-By': '2' });
    assert.is(refused.status, 421);
    assert.is(refused.json().error.code, 'SHARE_NOT_SERVED_HERE');
    assert.match(refused.json().error.message, new RegExp(`ask server 0 \\(${baseUrl(ports[0]!)}\\)`));
    assert.ok(!refused.text.includes('grace'), 'nothing of the share leaks');
    const routed = await fetchAlongRoute([b!.url], code);
    assert.is(routed.answeredBy.url, baseUrl(ports[0]!));
    assert.equal(routed.share.publicKey, key);
    assert.is(routed.share.fetchCount, 2, 'the forwarded fetch was counted once, by A');
  } finally {
    await Promise.all([a!.stop(), b!.stop()]);
  }
});

test('a topology that lists its URLs as the /v1/share endpoint (an older server advertising what its operator wrote) is followed the same', async () => {
  const ports = await freePorts(2);
  const spelled = (i: number) => {
    const c = ringConfig(i, ports);
    // Straight into the config, past the option parser that would turn them into the base: as an older server had them.
    c.topologyServers = c.topologyServers!.map((s) => ({ ...s, url: `${s.url}/v1/share` }));
    return c;
  };
  const [a, b] = await Promise.all([0, 1].map((i) => startTestServer({ config: spelled(i), replication: fast })));
  try {
    const code = await verified(a!, 'ivan@example.org');
    await waitFor('B holds the replica', () => b!.store.lookup(parseShareCode(code).canonical).state === 'live');
    assert.equal(
      (await topology(b!.url)).servers.map((s) => s.url),
      [0, 1].map((i) => `${baseUrl(ports[i]!)}/v1/share`),
    );
    for (const configured of [b!.url, `${b!.url}/v1/share`]) {
      const routed = await fetchAlongRoute([configured], code);
      assert.is(routed.answeredBy.url, baseUrl(ports[0]!), configured);
      assert.equal(
        routed.attempts.map((x) => x.url),
        [baseUrl(ports[0]!)],
        'A, the primary, answered first: no request went to .../v1/share/v1/share',
      );
      assert.equal(routed.share.publicKey, key);
    }
    // The client functions take either spelling.
    assert.equal((await fetchShare(`${a!.url}/v1/share`, code)).publicKey, key);
    assert.is((await topology(`${a!.url}/v1/share/`)).clusterId, CLUSTER);
  } finally {
    await Promise.all([a!.stop(), b!.stop()]);
  }
});

test('--promoted-owner: the standby serves the owner, reports itself promoted; the client falls over when the primary is down', async () => {
  const ports = await freePorts(2);
  const a = await startTestServer({ config: ringConfig(0, ports), replication: fast });
  let b = await startTestServer({ config: ringConfig(1, ports), replication: fast });
  const first = b;
  try {
    const code = await verified(a, 'heidi@example.org');
    await waitFor('B holds the replica', () => b.store.lookup(parseShareCode(code).canonical).state === 'live');
    await a.stop();
    await b.close();
    // Failover steps 1-3: promote owner 0 on B, mark A disabled and B promoted, route owner 0 to B first, restart.
    const promoted = ringConfig(1, ports, { promotedOwners: [0] });
    promoted.topologyServers = [
      { id: 0, url: baseUrl(ports[0]!), status: 'disabled' },
      { id: 1, url: b.url, status: 'promoted' },
    ];
    promoted.routes = [
      { owner: 0, primary: 1, failovers: [0] },
      { owner: 1, primary: 1, failovers: [0] },
    ];
    b = await startTestServer({ config: promoted, stateDir: b.stateDir, replication: fast });
    const t = await topology(b.url);
    assert.equal(t.promotedOwners, [0]);
    assert.equal(
      t.servers.map((s) => `${s.id}:${s.status}`),
      ['0:disabled', '1:promoted'],
    );
    assert.equal((await fetchShare(b.url, code)).publicKey, key);
    const routed = await fetchAlongRoute([baseUrl(ports[0]!), b.url], code, { timeoutMs: 2000 });
    assert.is(routed.answeredBy.url, b.url, 'A unreachable, the topology from B routes owner 0 to B');
    // Only the promotion makes B answer: with the old routes but the promoted owner, B still serves.
    await b.close();
    b = await startTestServer({
      config: ringConfig(1, ports, { promotedOwners: [0] }),
      stateDir: b.stateDir,
      replication: fast,
    });
    const viaFailover = await fetchAlongRoute([baseUrl(ports[0]!), b.url], code, { timeoutMs: 2000 });
    assert.is(viaFailover.answeredBy.url, b.url, 'primary 0 unreachable, failover 1 answered');
  } finally {
    await b.stop();
    await first.stop(); // removes the state folder and mail sink the restarts reused
  }
});

test('a lone server refuses owners it does not know, without looking the code up', async () => {
  const s = await startTestServer();
  try {
    const other = generateShareCode(3, 4).display;
    const res = await postJson(s.url, { op: 'fetch', code: other });
    assert.is(res.status, 421);
    assert.match(res.json().error.message, /owner 3 are not served by server 0; this server knows no server for it/);
    const own = await postJson(s.url, { op: 'fetch', code: generateShareCode(0, 0).display });
    assert.is(own.json().error.code, 'SHARE_NOT_FOUND');
  } finally {
    await s.stop();
  }
});

test.run();
