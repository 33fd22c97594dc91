/**
 * src/keyserver/routed-fetch.ts: which servers a share code is fetched from, in what
 * order, and what moves on to the next one. Pure candidate lists, then real
 * servers on loopback: one dead URL (connection refused) and one live server.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { candidateServers, fetchAlongRoute } from '../../src/keyserver/routed-fetch.js';
import { publish } from '../../src/keyserver/client.js';
import { generateShareCode, parseShareCode } from '../../src/keyserver/share-code.js';
import type { TopologyResponse } from '../../src/keyserver/wire/messages.js';
import { identityPublicKey, type TestServer } from './harness.js';
import { confirmLink, deadUrl, startRoutedServer } from '../cli/keyserver-harness.js';

const topo = (servers: TopologyResponse['servers'], routes: TopologyResponse['routes']): TopologyResponse => ({
  clusterId: 'default',
  topologyVersion: 1,
  serverId: 0,
  servers,
  routes,
  promotedOwners: [],
});
const s = (id: number, status: TopologyResponse['servers'][number]['status'] = 'active') => ({
  id,
  url: `https://k${id}.example.org/`,
  status,
});

test('candidates: the owner route (primary, then failovers in order); URLs without a trailing slash', () => {
  const code = generateShareCode(1, 2);
  const t = topo([s(0), s(1), s(2), s(3)], [{ owner: 1, primary: 3, failovers: [0, 2] }]);
  assert.equal(candidateServers(t, code, 'https://configured.example.org'), [
    { id: 3, url: 'https://k3.example.org' },
    { id: 0, url: 'https://k0.example.org' },
    { id: 2, url: 'https://k2.example.org' },
    { id: null, url: 'https://configured.example.org' },
  ]);
  assert.equal(
    candidateServers(t, code, 'https://k0.example.org').map((c) => c.id),
    [3, 0, 2],
    'the configured server is not tried twice',
  );
});

test('candidates: no route for the owner -> the primary then the secondary of the code', () => {
  const t = topo([s(0), s(1), s(2)], [{ owner: 0, primary: 0, failovers: [] }]);
  assert.equal(
    candidateServers(t, generateShareCode(2, 1), 'x').map((c) => c.id),
    [2, 1, null],
  );
});

test('candidates: disabled and unknown servers are skipped; the configured server comes last', () => {
  const t = topo(
    [s(0, 'disabled'), s(1, 'standby'), s(2, 'promoted')],
    [{ owner: 0, primary: 0, failovers: [7, 1, 2] }],
  );
  assert.equal(
    candidateServers(t, generateShareCode(0, 1), 'x').map((c) => c.id),
    [1, 2, null],
  );
  const none = topo([s(0, 'disabled')], []);
  assert.equal(candidateServers(none, generateShareCode(0, 5), 'https://configured.example.org'), [
    { id: null, url: 'https://configured.example.org' },
  ]);
});

let server: TestServer;
let dead: string;

test.before(async () => {
  dead = await deadUrl();
  // Server 1 is live; server 0 is a dead URL. Owner 1's shares: primary 0 (down), failover 1,
  // promoted by the operator (failover step 1), so server 1 serves them.
  // Owner 2: primary 1, failover 0. Owner 3: only 0. Owner 4: 0 then 1, which is not promoted for it (it forwards
  // to 0, and answers 502 when 0 is down). Owner 5: no route and no server (421).
  server = await startRoutedServer({
    serverId: 1,
    others: [{ id: 0, url: dead, status: 'active' }],
    routes: [
      { owner: 1, primary: 0, failovers: [1] },
      { owner: 2, primary: 1, failovers: [0] },
      { owner: 3, primary: 0, failovers: [] },
      { owner: 4, primary: 0, failovers: [1] },
    ],
    promotedOwners: [1],
  });
});
test.after(async () => {
  await server?.stop();
});

test('real servers: the primary is down, the failover answers; both attempts are reported', async () => {
  const published = await publish(server.url, identityPublicKey(), 'failover@example.org');
  assert.is(parseShareCode(published.code).primary, 1);
  await confirmLink(server, 'failover@example.org');
  const routed = await fetchAlongRoute(server.url, published.code.toLowerCase());
  assert.is(routed.share.email, 'failover@example.org');
  assert.equal(routed.answeredBy, { id: 1, url: server.url });
  assert.is(routed.attempts.length, 2);
  assert.equal({ id: routed.attempts[0]!.id, url: routed.attempts[0]!.url }, { id: 0, url: dead });
  assert.match(
    routed.attempts[0]!.error ?? '',
    /cannot reach the key server at http:\/\/127\.0\.0\.1:\d+ \(ECONNREFUSED\)/,
  );
  assert.is(routed.attempts[1]!.error, undefined);
});

test('real servers: a pending share found on the failover is reported as pending', async () => {
  const published = await publish(server.url, identityPublicKey(), 'pending@example.org');
  try {
    await fetchAlongRoute(server.url, published.code);
    assert.unreachable('pending share fetched');
  } catch (err) {
    assert.is((err as { code?: string }).code, 'SHARE_PENDING');
  }
});

test("real servers: an answer about the share is final (the primary's not-found does not fall over to a dead failover)", async () => {
  try {
    await fetchAlongRoute(server.url, generateShareCode(2, 0).display);
    assert.unreachable('unknown code fetched');
  } catch (err) {
    assert.is((err as { code?: string }).code, 'SHARE_NOT_FOUND');
  }
});

test('real servers: every server of the route down -> SERVER_UNREACHABLE naming each one', async () => {
  try {
    await fetchAlongRoute(server.url, generateShareCode(3, 0).display);
    assert.unreachable('fetched from a dead server');
  } catch (err) {
    assert.is((err as { code?: string }).code, 'SERVER_UNREACHABLE');
    assert.match((err as Error).message, `server 0 (${dead}): cannot reach`);
    // Asked last, the configured server forwarded the fetch along the same route, and said so (502).
    assert.match(
      (err as Error).message,
      `server (${server.url}): server 1 passed this request on, but no server of the share's owner answered it: server 0 (${dead}): cannot reach`,
      'the configured server was asked last',
    );
  }
});

test("real servers: a live server whose forward reaches none of the owner's servers (502) is passed over like a dead one", async () => {
  try {
    await fetchAlongRoute(server.url, generateShareCode(4, 0).display);
    assert.unreachable('fetched from a server that does not serve owner 4');
  } catch (err) {
    assert.is((err as { code?: string }).code, 'SERVER_UNREACHABLE');
    assert.match((err as Error).message, `server 0 (${dead}): cannot reach`);
    assert.match(
      (err as Error).message,
      `server 1 (${server.url}): server 1 passed this request on, but no server of the share's owner answered it`,
    );
  }
});

test('real servers: a server with no route to the owner at all answers 421, passed over like a dead one', async () => {
  try {
    await fetchAlongRoute(server.url, generateShareCode(5, 6).display);
    assert.unreachable('fetched from a server that knows no server of owner 5');
  } catch (err) {
    assert.is((err as { code?: string }).code, 'SERVER_UNREACHABLE');
    assert.match(
      (err as Error).message,
      `server (${server.url}): shares of owner 5 are not served by server 1; this server knows no server for it`,
    );
  }
});

test('the configured server itself down: the topology cannot be read (SERVER_UNREACHABLE), a typo is caught first', async () => {
  try {
    await fetchAlongRoute(dead, generateShareCode(0, 0).display);
    assert.unreachable('no error');
  } catch (err) {
    assert.is((err as { code?: string }).code, 'SERVER_UNREACHABLE');
  }
  const code = generateShareCode(0, 0).display;
  const typo = `${code.slice(0, -1)}${code.endsWith('0') ? '1' : '0'}`;
  try {
    await fetchAlongRoute(dead, typo);
    assert.unreachable('typo accepted');
  } catch (err) {
    assert.is((err as { code?: string }).code, 'CODE_TYPO');
  }
});

test('the configured server down, a cached topology: its servers are asked for a fresh one, then the share', async () => {
  const published = await publish(server.url, identityPublicKey(), 'cached@example.org');
  await confirmLink(server, 'cached@example.org');
  // Learned earlier (from the now dead server 0): server 1 at its real URL.
  const cached = {
    ...topo(
      [
        { id: 0, url: dead, status: 'active' },
        { id: 1, url: server.url, status: 'standby' },
      ],
      [{ owner: 1, primary: 0, failovers: [1] }],
    ),
    clusterId: 'default',
  };
  const routed = await fetchAlongRoute(dead, published.code, { cached });
  assert.is(routed.share.email, 'cached@example.org');
  assert.equal(
    routed.topologySource,
    { kind: 'server', url: server.url },
    'the live server of the cached topology answered',
  );
  assert.match(routed.topologyError ?? '', /ECONNREFUSED/);
  assert.equal(routed.answeredBy, { id: 1, url: server.url });
});

test('a cached topology of another cluster is not replaced by its servers; none answering: the cached one routes', async () => {
  const published = await publish(server.url, identityPublicKey(), 'cached2@example.org');
  await confirmLink(server, 'cached2@example.org');
  // Only dead servers to ask: the cached topology itself routes (server 1 reached under another URL alias).
  const alias = server.url.replace('127.0.0.1', 'localhost');
  const cached = {
    ...topo(
      [
        { id: 0, url: dead, status: 'active' },
        { id: 1, url: alias, status: 'active' },
      ],
      [{ owner: 1, primary: 0, failovers: [1] }],
    ),
    clusterId: 'elsewhere',
  };
  const routed = await fetchAlongRoute(dead, published.code, { cached });
  assert.equal(
    routed.topologySource,
    { kind: 'cache' },
    "server 1 answered for cluster 'default', not the cached cluster",
  );
  assert.equal(routed.answeredBy, { id: 1, url: alias });
  // A cached version newer than the live answer (same cluster) routes.
  const newer = { ...cached, clusterId: 'default', topologyVersion: 5 };
  const again = await fetchAlongRoute(server.url, published.code, { cached: newer });
  assert.equal(again.topologySource, { kind: 'cache' });
});

test.run();
