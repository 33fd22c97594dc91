/**
 * Every ring server answers fetches, creates and unpublishes of shares it
 * does not serve, by passing them on to the owner's servers in route order
 * (src/keyserver/forward.ts), with real server processes on loopback:
 *
 * - a ring of three: the third server answers a fetch of a share it does not
 *   hold, the fetch is counted once (by the owner), a failed primary is
 *   passed over for its failover, 421 stays only for an owner with no route,
 *   and a create on a server whose own codes another server serves is made
 *   there;
 * - a pair with two processes each: an unpublish sent to the server that is
 *   not the owner is passed on, and afterwards every process of both servers
 *   answers 410 and the tombstone is in the peer's store.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { randomBytes } from 'node:crypto';
import { request } from 'node:http';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import sodium from 'sodium-native';
import { fetchShare, publish, unpublish } from '../../src/keyserver/client.js';
import { parseShareCode, generateShareCode } from '../../src/keyserver/share-code.js';
import { readStateReadOnly } from '../../src/keyserver/store/read-only.js';
import { BINARY_MEDIA_TYPE, encodeShareRequest, type UnpublishRequest } from '../../src/keyserver/wire/messages.js';
import { unpublishSignedBytes } from '../../src/keyserver/wire/unpublish-signature.js';
import {
  CLUSTER,
  TOKEN,
  baseUrl,
  freePorts,
  replicateUrl,
  startServerProcess,
  waitFor,
  type ServerProcess,
  LIMITS_OFF,
} from './cluster.js';
import { http, mailSink, postJson, tempDir, type MailSink, type RawResponse } from './harness.js';

/** A publisher's identity: the 65-byte public key and an Ed25519 signer. */
function identity(): { publicKey: Buffer; sign(bytes: Buffer): Buffer } {
  const xpk = Buffer.alloc(32);
  const xsk = Buffer.alloc(32);
  sodium.crypto_kx_keypair(xpk, xsk);
  const epk = Buffer.alloc(32);
  const esk = Buffer.alloc(64);
  sodium.crypto_sign_keypair(epk, esk);
  return {
    publicKey: Buffer.concat([Buffer.from([1]), xpk, epk]),
    sign: (bytes) => {
      const sig = Buffer.alloc(64);
      sodium.crypto_sign_detached(sig, bytes, esk);
      return sig;
    },
  };
}

/** The run options of node `i` of a cluster on `ports`: every node lists all, active; replication to the next. */
function nodeArgs(
  i: number,
  ports: number[],
  dir: string,
  sink: MailSink,
  routes: string[],
  extra: string[] = [],
): string[] {
  const servers = ports.flatMap((p, id) => ['--topology-server', `${id}=${baseUrl(p)},active`]);
  return [
    '--bind',
    `127.0.0.1:${ports[i]}`,
    '--public-url',
    baseUrl(ports[i]!),
    '--state-dir',
    join(dir, `state-${i}`),
    '--server-id',
    String(i),
    '--cluster-id',
    CLUSTER,
    '--replication-token-file',
    join(dir, 'token'),
    '--replication-peer-url',
    replicateUrl(ports[(i + 1) % ports.length]!),
    ...servers,
    ...routes.flatMap((r) => ['--route', r]),
    '--verification-email-command',
    sink.command,
    ...LIMITS_OFF,
    ...extra,
  ];
}

async function cluster(name: string, n: number) {
  const ports = await freePorts(n);
  const dir = tempDir(name);
  writeFileSync(join(dir.path, 'token'), `${TOKEN}\n`, { mode: 0o600 });
  const sink = mailSink();
  const procs: ServerProcess[] = [];
  const start = async (args: string[]) => {
    const p = await startServerProcess(args);
    procs.push(p);
    return p;
  };
  const cleanup = async () => {
    await Promise.all(procs.map((p) => p.stop()));
    sink.remove();
    dir.remove();
  };
  return { ports, dir: dir.path, sink, start, cleanup };
}

/** Publishes `key` for `email` on `url` and confirms the mailed link (wherever it points). */
async function publishVerified(url: string, sink: MailSink, key: Buffer, email: string): Promise<string> {
  const code = (await publish(url, key, email)).code;
  assert.is((await http(sink.lastLink(email), { method: 'POST' })).status, 200);
  return code;
}

async function held(dir: string, i: number, canonical: string) {
  const state = await readStateReadOnly(join(dir, `state-${i}`), i);
  return { share: state.index.shares.get(canonical), tombstone: state.index.tombstones.get(canonical) };
}

/** One request on a connection of its own: with --processes 2, connections go to the processes in turn. */
function fresh(url: string, body: Buffer): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const req = request(
      `${url}/v1/share`,
      { method: 'POST', agent: false, headers: { 'Content-Type': BINARY_MEDIA_TYPE, Accept: 'application/json' } },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const b = Buffer.concat(chunks);
          resolve({
            status: res.statusCode ?? 0,
            headers: res.headers,
            body: b,
            text: b.toString(),
            json: () => JSON.parse(b.toString()),
          });
        });
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

const ringRoutes = ['0=0,1', '1=1,2', '2=0,1'];

test('a ring of three: each server answers fetches of shares it does not serve, counted once; 421 only without a route', async () => {
  const c = await cluster('ring3', 3);
  try {
    // Server 2 serves owner 1 too (a promoted standby), and its own codes are served by server 0 (route 2=0,1).
    const [s0, s1, s2] = [
      await c.start(nodeArgs(0, c.ports, c.dir, c.sink, ringRoutes)),
      await c.start(nodeArgs(1, c.ports, c.dir, c.sink, ringRoutes)),
      await c.start(nodeArgs(2, c.ports, c.dir, c.sink, ringRoutes, ['--promoted-owner', '1'])),
    ];
    const id = identity();

    // A share of owner 1 reaches server 2 (1 -> 2). Server 1 dies: server 0 passes the fetch to owner 1's
    // primary (down), then to its failover, server 2.
    const one = await publishVerified(s1!.url, c.sink, id.publicKey, 'one@example.org');
    assert.is(parseShareCode(one).primary, 1);
    await waitFor(
      "server 2 holds owner 1's share, confirmed",
      async () => ((await held(c.dir, 2, parseShareCode(one).canonical)).share?.verifiedAt ?? 0) > 0,
    );
    await s1!.kill();
    const viaFailover = await fetchShare(s0!.url, one);
    assert.equal(viaFailover.publicKey, id.publicKey, "server 0 answered with the failover's copy");

    // A share of owner 0 published now goes nowhere but to the dead server 1: server 2 never holds it.
    const zero = await publishVerified(s0!.url, c.sink, id.publicKey, 'zero@example.org');
    const canonical = parseShareCode(zero).canonical;
    const first = await fetchShare(s2!.url, zero);
    assert.equal(first.publicKey, id.publicKey, 'the third server answered');
    assert.is(first.email, 'zero@example.org');
    assert.is(first.fetchCount, 1);
    const json = await postJson(s2!.url, { op: 'fetch', code: zero }, '/v1/share', { Accept: 'application/json' });
    assert.is(json.status, 200, json.text);
    assert.is(json.json().fetch_count, 2, 'JSON in, JSON out, through the forward');
    assert.is((await fetchShare(s0!.url, zero)).fetchCount, 3, 'each fetch was counted once, by the owner');
    assert.is((await held(c.dir, 2, canonical)).share, undefined, 'server 2 does not hold the share it answered');

    // An answer about the share is the owner's, passed back as it is; an owner without any route is 421.
    const unknown = await postJson(s2!.url, { op: 'fetch', code: generateShareCode(0, 1).display });
    assert.is(unknown.status, 404);
    assert.is(unknown.json().error.code, 'SHARE_NOT_FOUND');
    const nowhere = await postJson(s2!.url, { op: 'fetch', code: generateShareCode(7, 0).display });
    assert.is(nowhere.status, 421);
    assert.match(
      nowhere.json().error.message,
      /shares of owner 7 are not served by server 2; this server knows no server for it/,
    );

    // A create on server 2, whose own codes server 0 serves, is made on server 0: its code, its link.
    const created = await publish(s2!.url, id.publicKey, 'edge@example.org');
    assert.is(parseShareCode(created.code).primary, 0, 'the share was created by server 0');
    assert.ok(
      c.sink.lastLink('edge@example.org').startsWith(`${baseUrl(c.ports[0]!)}/verify/`),
      'and its link points there',
    );
    assert.not.match(s2!.stderr(), /forward:.*publishing here/);
  } finally {
    await c.cleanup();
  }
});

test("a pair with two processes each: an unpublish sent to the non-owner is passed on; then every process of both answers 410, the tombstone is in the peer's store", async () => {
  const c = await cluster('pair-unpublish', 2);
  try {
    const pairRoutes = ['0=0,1', '1=1,0'];
    const [a, b] = [
      await c.start(nodeArgs(0, c.ports, c.dir, c.sink, pairRoutes, ['--processes', '2'])),
      await c.start(nodeArgs(1, c.ports, c.dir, c.sink, pairRoutes, ['--processes', '2'])),
    ];
    const id = identity();
    const code = await publishVerified(a!.url, c.sink, id.publicKey, 'pair@example.org');
    const canonical = parseShareCode(code).canonical;
    await waitFor('B holds the share', async () => ((await held(c.dir, 1, canonical)).share?.verifiedAt ?? 0) > 0);
    const fetch = encodeShareRequest({ op: 'fetch', code });
    for (let i = 0; i < 4; i++)
      assert.is((await fresh(b!.url, fetch)).status, 200, 'every process of B passes a fetch on to A');

    // Someone else's key, and a stale timestamp: refused, the share stays.
    const other = identity();
    const signed = (signer: typeof id, timestamp: number): UnpublishRequest => {
      const n = randomBytes(16);
      return {
        op: 'unpublish',
        code,
        timestamp,
        nonce: n,
        signature: signer.sign(unpublishSignedBytes(canonical, timestamp, n)),
      };
    };
    const forged = await fresh(b!.url, encodeShareRequest(signed(other, Date.now())));
    assert.is(forged.status, 403, forged.text);
    assert.is(forged.json().error.code, 'UNPUBLISH_FORBIDDEN');
    const stale = await fresh(b!.url, encodeShareRequest(signed(id, Date.now() - 10 * 60_000)));
    assert.is(stale.status, 401);
    assert.is(stale.json().error.code, 'UNPUBLISH_STALE');
    assert.is((await fresh(a!.url, fetch)).status, 200, 'the share is still served');

    // The publisher's request, sent to B: passed on to A, which deletes. Played again, it finds nothing.
    const request = encodeShareRequest(signed(id, Date.now()));
    const done = await fresh(b!.url, request);
    assert.is(done.status, 200, done.text);
    assert.equal(Object.keys(done.json()), ['type', 'code', 'deleted_at']);
    assert.is(done.json().code, code);
    const replayed = await fresh(b!.url, request);
    assert.is(replayed.status, 410, 'a replayed request is refused: the share is gone');

    await waitFor(
      "the tombstone is in B's store",
      async () => (await held(c.dir, 1, canonical)).tombstone?.reason === 'deleted',
    );
    assert.is((await held(c.dir, 1, canonical)).share, undefined);
    for (const server of [a!, b!]) {
      for (let i = 0; i < 4; i++) {
        const r = await fresh(server.url, fetch);
        assert.is(r.status, 410, `${server.url}, connection ${i}: ${r.text}`);
        assert.is(r.json().error.code, 'SHARE_EXPIRED');
        assert.match(r.json().error.message, /expired or was unpublished/);
      }
    }

    // The client's own path, through A's processes: a second share, unpublished with unpublish().
    const second = await publishVerified(b!.url, c.sink, id.publicKey, 'pair2@example.org');
    await waitFor(
      'A holds the second share',
      async () => ((await held(c.dir, 0, parseShareCode(second).canonical)).share?.verifiedAt ?? 0) > 0,
    );
    const gone = await unpublish(a!.url, second, id.sign);
    assert.is(gone.code, second);
    for (const server of [a!, b!])
      for (let i = 0; i < 2; i++)
        assert.is((await fresh(server.url, encodeShareRequest({ op: 'fetch', code: second }))).status, 410);
    assert.not.match(a!.stderr() + b!.stderr(), /ERROR/);
  } finally {
    await c.cleanup();
  }
});

test.run();
