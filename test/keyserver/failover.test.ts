/**
 * The operator failover flow of the spec, end to end with real server
 * processes configured by files as an operator would: two nodes replicate;
 * A is killed (SIGKILL); B is restarted with A's owner promoted; clients
 * fetch A's shares from B; A returns; resync-peer from B to A; A has caught
 * up; the promotion is removed. A client configured with A alone fails over
 * to B through the topology it cached. And the durable queue under kill -9.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fetchShare, publish, status } from '../../src/keyserver/client.js';
import { fetchAlongRoute } from '../../src/keyserver/routed-fetch.js';
import { FETCH_FLUSH_MS } from '../../src/keyserver/server.js';
import type { TopologyResponse } from '../../src/keyserver/wire/messages.js';
import { fingerprintOf, formatFingerprint } from '../../src/vault/fingerprint.js';
import { cliEnv } from '../cli/harness.js';
import { http, identityPublicKey, mailSink, postJson, tempDir, type MailSink } from './harness.js';
import {
  CLUSTER,
  TOKEN,
  baseUrl,
  freePorts,
  replicateUrl,
  runServerCommand,
  startServerProcess,
  waitFor,
  type ServerProcess,
} from './cluster.js';

const key = identityPublicKey();

/**
 * How an operator writes a server's public URL: as the base (`http://host:port`) or, as the spec words it ("the
 * public /v1/share base URL"), as the endpoint itself (`http://host:port/v1/share`). Both name the same server.
 */
type Spelling = 'base' | 'endpoint';
const publicUrl = (port: number, spelling: Spelling) =>
  spelling === 'base' ? baseUrl(port) : `${baseUrl(port)}/v1/share`;

/** An operator's config file for node `id` of a pair on `ports`. */
function writeNodeConfig(
  dir: string,
  id: number,
  ports: number[],
  sink: MailSink,
  spelling: Spelling = 'base',
): string {
  const other = 1 - id;
  const path = join(dir, `node-${id}.toml`);
  writeFileSync(
    path,
    [
      `# node ${id} of the pair`,
      `bind_addr = "127.0.0.1:${ports[id]}"`,
      `state_dir = "${join(dir, `state-${id}`)}"`,
      `server_id = ${id}`,
      `cluster_id = "${CLUSTER}"`,
      `public_url = "${publicUrl(ports[id]!, spelling)}"`,
      `topology_server = ["${id}=${publicUrl(ports[id]!, spelling)},active", "${other}=${publicUrl(ports[other]!, spelling)},standby"]`,
      'route = "0=0,1"',
      'route = "1=1,0"',
      `replication_token = "${TOKEN}"`,
      `replication_peer_url = "${replicateUrl(ports[other]!)}"`,
      `verification_email_command = "${sink.command}"`,
      'rate_limit_per_minute = 0',
      'verification_email_rate_limit_per_hour = 0',
      'verification_email_ip_rate_limit_per_hour = 0',
      '',
    ].join('\n'),
  );
  return path;
}

/** Ports, config files and mail sinks of a pair, and the processes started for it (stopped by cleanup). */
async function pair(name: string, spelling: Spelling = 'base') {
  const ports = await freePorts(2);
  const dir = tempDir(name);
  const sinks = [mailSink(), mailSink()];
  const conf = [0, 1].map((id) => writeNodeConfig(dir.path, id, ports, sinks[id]!, spelling));
  const procs: ServerProcess[] = [];
  const cleanup = async () => {
    await Promise.all(procs.map((p) => p.stop()));
    for (const s of sinks) s.remove();
    dir.remove();
  };
  return { ports, conf, sinks, procs, cleanup };
}

async function publishVerified(url: string, sink: MailSink, email: string): Promise<string> {
  const code = (await publish(url, key, email)).code;
  assert.is((await http(sink.lastLink(email), { method: 'POST' })).status, 200);
  return code;
}

test('failover: A killed, owner 0 promoted on B, fetched from B, A back, resync-peer B -> A, promotion removed', async () => {
  const { ports, conf, sinks, procs, cleanup } = await pair('failover');
  const start = async (args: string[]) => {
    const p = await startServerProcess(args);
    procs.push(p);
    return p;
  };
  try {
    let a = await start(['--config', conf[0]!]);
    let b = await start(['--config', conf[1]!]);
    const aCodes = [];
    for (let i = 0; i < 3; i++) aCodes.push(await publishVerified(a.url, sinks[0]!, `a${i}@example.org`));
    const bCode = await publishVerified(b.url, sinks[1]!, 'b0@example.org');
    await waitFor(
      'the pair converges',
      async () =>
        (await status(a.url)).replication_pending === 0 &&
        (await status(b.url)).replication_pending === 0 &&
        (await status(b.url)).shares_live === 4,
    );

    // A dies. B holds A's shares but, as standby for owner 0, does not serve them: it passes the fetch on to A, in vain.
    await a.kill();
    const refused = await postJson(b.url, { op: 'fetch', code: aCodes[0] });
    assert.is(refused.status, 502);
    assert.is(refused.json().error.code, 'OWNER_UNREACHABLE');
    let err: unknown;
    try {
      await fetchAlongRoute([a.url, b.url], aCodes[0]!, { timeoutMs: 2000 });
    } catch (e) {
      err = e;
    }
    assert.is((err as { code?: string }).code, 'SERVER_UNREACHABLE', 'before the promotion nobody serves owner 0');
    assert.match(
      (err as Error).message,
      new RegExp(
        `server 1 \\(${b.url}\\): server 1 passed this request on, but no server of the share's owner answered it: server 0 `,
      ),
      'the refusal of each server tried is named',
    );

    // Steps 1-3: promote owner 0 on B, update statuses and routes, restart B.
    await b.stop();
    b = await start([
      '--config',
      conf[1]!,
      '--promoted-owner',
      '0',
      '--topology-server',
      `0=${baseUrl(ports[0]!)},disabled`,
      '--topology-server',
      `1=${baseUrl(ports[1]!)},promoted`,
      '--route',
      '0=1,0',
    ]);
    for (const code of aCodes) {
      const got = await fetchAlongRoute([a.url, b.url], code, { timeoutMs: 2000 });
      assert.is(got.answeredBy.url, b.url);
      assert.equal(got.share.publicKey, key);
      assert.is(got.share.fetchCount, 1);
    }
    // Life goes on on B meanwhile; its queue for A grows while A is down. Fetch counts are written (and so
    // queued) up to FETCH_FLUSH_MS after the fetch: wait until all three are, or the resync below may read B's
    // state before they are and the counts reach A only after this test has looked (the CI flake of 2026-11-23).
    const during = await publishVerified(b.url, sinks[1]!, 'b1@example.org');
    await waitFor(
      'B queued the 3 fetch counts and the new share for the absent A',
      async () => (await status(b.url)).replication_pending === 4,
      FETCH_FLUSH_MS + 5_000,
    );

    // Step 4: A returns with its old state, then resync-peer from B to A.
    a = await start(['--config', conf[0]!]);
    const resync = await runServerCommand(['resync-peer', '--config', conf[1]!, '--peer-url', replicateUrl(ports[0]!)]);
    assert.is(resync.code, 0, resync.stderr);
    assert.match(resync.stdout, /resync-peer: sent 5 share\(s\) \(0 pending verification\) .* \(server 0\)/);
    let seen = '';
    await waitFor(
      'A caught up and both queues drained',
      async () => {
        const [sa, sb] = await Promise.all(
          [a, b].map(async (p) =>
            (await http(`${p.url}/v1/status`, { headers: { Accept: 'application/json' } })).json(),
          ),
        );
        seen = JSON.stringify({ a: sa, b: sb });
        return (
          sa.shares_live === 5 && sb.shares_live === 5 && sa.replication_pending === 0 && sb.replication_pending === 0
        );
      },
      15_000,
    ).catch((err) => {
      throw new Error(
        `${(err as Error).message}\nlast status: ${seen}\nA: ${a.stderr().slice(-1500)}\nB: ${b.stderr().slice(-1500)}`,
      );
    });

    // The promotion is removed: B back to its own configuration.
    await b.stop();
    b = await start(['--config', conf[1]!]);
    const viaB = await postJson(b.url, { op: 'fetch', code: aCodes[1] });
    assert.is(viaB.status, 200, 'B passes the fetch on to A');
    assert.is(
      viaB.json().fetch_count,
      2,
      `the fetch served by B during the failover reached A\nresync: ${resync.stdout}${resync.stderr}\nA: ${a.stderr().slice(-3000)}\nB: ${b.stderr().slice(-3000)}`,
    );
    const back = await fetchAlongRoute([b.url], aCodes[1]!);
    assert.is(back.answeredBy.url, a.url, 'owner 0 is served by A again');
    assert.is(back.share.fetchCount, 3, 'the fetch B passed on was counted once, by A');
    assert.equal((await fetchShare(b.url, during)).publicKey, key);
    assert.equal((await fetchShare(b.url, bCode)).publicKey, key);
  } finally {
    await cleanup();
  }
});

for (const spelling of ['base', 'endpoint'] as const) {
  test(`client failover (topology and public URLs written as the ${spelling}): a client configured with A alone, that ran doctor against A once, receives from B after A died and B took owner 0`, async () => {
    const { ports, conf, sinks, procs, cleanup } = await pair(`client-failover-${spelling}`, spelling);
    const bob = cliEnv();
    try {
      const a = await startServerProcess(['--config', conf[0]!]);
      let b = await startServerProcess(['--config', conf[1]!]);
      procs.push(a, b);
      // Whichever way the operator wrote them, the servers advertise the base URLs, and the links they mail work.
      const advertised = (await http(`${a.url}/v1/topology`, { headers: { Accept: 'application/json' } }))
        .json()
        .servers.map((x: { url: string }) => x.url);
      assert.equal(advertised, [baseUrl(ports[0]!), baseUrl(ports[1]!)]);
      await bob.initVault();
      // Bob is configured with A alone (spelled as the operator spelled it), and asks it once (doctor): the topology
      // is now in his cache folder.
      const env = { STASH_KEY_SERVER_URL: publicUrl(ports[0]!, spelling), STASH_PASSWORD_FILE: bob.pwFile };
      const doctor = await bob.run(['doctor', '--json'], { env });
      const ks = (JSON.parse(doctor.stdout) as { keyServer: { reachable: boolean; clusterId: string } }).keyServer;
      assert.equal([ks.reachable, ks.clusterId], [true, CLUSTER], doctor.stdout);

      const code = await publishVerified(a.url, sinks[0]!, 'alice-fo@example.org');
      assert.ok(
        sinks[0]!.lastLink('alice-fo@example.org').startsWith(`${a.url}/verify/`),
        sinks[0]!.lastLink('alice-fo@example.org'),
      );
      await waitFor(
        'B holds the share',
        async () => (await status(b.url)).shares_live === 1 && (await status(a.url)).replication_pending === 0,
      );
      await a.kill();
      await b.stop();
      // Steps 1-3 of the runbook, with the flags written the same way.
      b = await startServerProcess([
        '--config',
        conf[1]!,
        '--promoted-owner',
        '0',
        '--topology-server',
        `0=${publicUrl(ports[0]!, spelling)},disabled`,
        '--topology-server',
        `1=${publicUrl(ports[1]!, spelling)},promoted`,
        '--route',
        '0=1,0',
      ]);
      procs.push(b);

      const fingerprint = formatFingerprint(fingerprintOf(key.subarray(1, 33), key.subarray(33, 65)));
      const r = await bob.run(
        ['vault', 'contact', 'receive', code, '--fingerprint', fingerprint, '--name', 'alice', '--json'],
        { env },
      );
      assert.is(r.code, 0, r.stderr);
      const got = JSON.parse(r.stdout) as { server: string; contact: { name: string } };
      assert.is(got.server, b.url, 'B answered');
      assert.is(got.contact.name, 'alice');
      assert.match(
        r.stderr,
        new RegExp(
          `^stash: ${a.url} did not answer \\(.*ECONNREFUSED.*\\); asked ${b.url}, a server of the same cluster it listed\\n`,
        ),
      );
      // The cache now also holds B's answer, still found through A's URL.
      const cached = JSON.parse(
        readFileSync(join(bob.env.XDG_CACHE_HOME!, 'stash', `topology-${CLUSTER}.json`), 'utf8'),
      ) as { learnedFrom: string; askedAt: string[]; topology: TopologyResponse };
      assert.is(cached.learnedFrom, b.url);
      assert.ok(cached.askedAt.includes(a.url), JSON.stringify(cached.askedAt));
      assert.equal(cached.topology.promotedOwners, [0]);
      // The library's route from A alone, written either way, through a cached topology whose URLs are written
      // either way too (as a server that advertised what its operator wrote would have answered).
      for (const configured of [a.url, `${a.url}/v1/share/`]) {
        for (const listed of ['base', 'endpoint'] as const) {
          const topology: TopologyResponse = {
            ...cached.topology,
            servers: [0, 1].map((id) => ({
              id,
              url: publicUrl(ports[id]!, listed),
              status: id === 0 ? ('disabled' as const) : ('promoted' as const),
            })),
          };
          const routed = await fetchAlongRoute([configured], code, { timeoutMs: 2000, cached: topology });
          assert.is(routed.answeredBy.url, b.url, `${configured}, cached URLs written as the ${listed}`);
        }
      }
    } finally {
      await bob.dispose();
      await cleanup();
    }
  });
}

test('kill -9 of a server with events queued for a down peer loses none of them', async () => {
  const { conf, procs, cleanup } = await pair('kill9');
  try {
    const first = await startServerProcess(['--config', conf[0]!]);
    procs.push(first);
    const codes = await Promise.all(
      Array.from({ length: 20 }, (_v, i) => publish(first.url, key, `k${i}@example.org`).then((p) => p.code)),
    );
    assert.ok((await status(first.url)).replication_pending >= 20);
    await first.kill();
    const again = await startServerProcess(['--config', conf[0]!]);
    procs.push(again);
    assert.ok((await status(again.url)).replication_pending >= 20, 'the queue survived kill -9');
    const peer = await startServerProcess(['--config', conf[1]!]);
    procs.push(peer);
    await waitFor(
      'every queued event arrives',
      async () =>
        (await status(peer.url)).shares_pending === codes.length && (await status(again.url)).replication_pending === 0,
      15_000,
    );
  } finally {
    await cleanup();
  }
});

test('kill -9 in the middle of live replication: after a restart the peer holds every acknowledged publish', async () => {
  const { conf, procs, cleanup } = await pair('kill9-live');
  try {
    const first = await startServerProcess(['--config', conf[0]!]);
    const peer = await startServerProcess(['--config', conf[1]!]);
    procs.push(first, peer);
    const acked: string[] = [];
    let stop = false;
    let killed = false;
    const worker = async (w: number) => {
      for (let i = 0; !stop; i++) {
        try {
          acked.push((await publish(first.url, key, `live${w}.${i}@example.org`, { timeoutMs: 5000 })).code);
        } catch {
          // After the kill the server is gone; before it, an unanswered publish (a reset seen at
          // load 18 in a CI run) is simply not acknowledged, and the worker goes on.
          if (killed) return;
        }
      }
    };
    const workers = Array.from({ length: 4 }, (_v, w) => worker(w));
    await waitFor(
      'publishes flow and replicate',
      async () => acked.length >= 60 && (await status(peer.url)).shares_pending > 0,
      30_000,
    );
    killed = true;
    await first.kill();
    stop = true;
    await Promise.all(workers);
    const again = await startServerProcess(['--config', conf[0]!]);
    procs.push(again);
    await waitFor(
      'both hold the same shares, every acknowledged one included',
      async () => {
        const [sa, sp] = await Promise.all([status(again.url), status(peer.url)]);
        return (
          sa.replication_pending === 0 && sa.shares_pending === sp.shares_pending && sp.shares_pending >= acked.length
        );
      },
      15_000,
    );
  } finally {
    await cleanup();
  }
});

test.run();
