import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { fetchShare, publish, status, topology } from '../../src/keyserver/client.js';
import { generateShareCode } from '../../src/keyserver/share-code.js';
import { fingerprintOf, formatFingerprint } from '../../src/vault/fingerprint.js';
import { decodeStatus, decodeTopology, encodeShareRequest } from '../../src/keyserver/wire/messages.js';
import { BINARY, ManualClock, http, identityPublicKey, postBinary, postJson, startTestServer } from './harness.js';

const key = identityPublicKey();

async function rejects(p: Promise<unknown>, code: string, message?: RegExp): Promise<Error & { code: string }> {
  try {
    await p;
  } catch (err) {
    assert.is((err as { code?: string }).code, code, (err as Error).message);
    if (message) assert.match((err as Error).message, message);
    return err as Error & { code: string };
  }
  assert.unreachable(`expected ${code}`);
  throw new Error('unreachable');
}

test('publish, the GET page does not verify, the POST does (once), then fetch counts', async () => {
  const s = await startTestServer();
  try {
    const pub = await publish(s.url, key, 'Alice.Liddell@Example.ORG');
    assert.is(pub.verification, 'sent');
    assert.match(pub.code, /^00-[0-9A-Z]{4}-[0-9A-Z]{4}-[0-9A-Z]{4}-[0-9A-Z]$/);
    assert.match(pub.message, /A\*\*\*@example\.org/);
    assert.ok(Math.abs(pub.expiresAt.getTime() - Date.now() - 900_000) < 5_000, 'default TTL 15 minutes');

    const mails = s.sink.mails();
    assert.is(mails.length, 1);
    assert.is(mails[0]!.argc, 2, 'exactly <email> <url>');
    assert.is(mails[0]!.email, 'Alice.Liddell@example.org', 'domain lower-cased, local part kept');
    const link = mails[0]!.url;
    assert.match(link, new RegExp(`^${s.url}/verify/[A-Za-z0-9_-]{43}$`));
    const token = link.split('/').pop()!;

    await rejects(fetchShare(s.url, pub.code), 'SHARE_PENDING', /pending verification/);

    // A mail scanner prefetches the link (twice): nothing is verified.
    for (let i = 0; i < 2; i++) {
      const page = await http(link);
      assert.is(page.status, 200);
      assert.match(String(page.headers['content-type']), /^text\/html/);
      assert.match(page.text, /A\*\*\*@example\.org/);
      assert.is((page.text.match(/<button/g) ?? []).length, 1, 'one button');
      assert.match(page.text, /<form method="post">/);
      assert.not.ok(page.text.includes(token), 'the page does not repeat the token');
      assert.not.ok(page.text.includes('Alice.Liddell'), 'the address is masked');
      assert.match(String(page.headers['content-security-policy']), /default-src 'none'/);
      assert.is(page.headers['referrer-policy'], 'no-referrer');
    }
    await rejects(fetchShare(s.url, pub.code), 'SHARE_PENDING');

    const confirm = await http(link, {
      method: 'POST',
      headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
      body: '',
    });
    assert.is(confirm.status, 200);
    assert.match(confirm.text, /Address confirmed/);
    // The vault's own fingerprint of the key (the one `stash vault identity show` prints).
    const fingerprint = formatFingerprint(fingerprintOf(key.subarray(1, 33), key.subarray(33, 65)));
    assert.ok(confirm.text.includes(fingerprint), 'the confirmed page shows the fingerprint');
    // The token is single-use: confirming again changes nothing and says so.
    const again = await http(link, { method: 'POST' });
    assert.is(again.status, 200);
    assert.match(again.text, /<title>Already confirmed<\/title>/);
    assert.match(again.text, /was already confirmed with this link at \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC/);
    const reopened = await http(link);
    assert.is(reopened.status, 200);
    assert.match(reopened.text, /<title>Already confirmed<\/title>/);
    assert.ok(reopened.text.includes(fingerprint));
    assert.not.match(reopened.text, /<button/, 'nothing left to press');
    assert.is((await http(`${s.url}/verify/${'A'.repeat(43)}`)).status, 404, 'an unknown token is still unknown');
    // Every page on /verify, error pages included, forbids framing (clickjacking of the confirm button).
    for (const [path, method, status] of [
      [link, 'GET', 200],
      [`${s.url}/verify/${'A'.repeat(43)}`, 'GET', 404],
      [link, 'PUT', 405],
      [`${s.url}/verify/a/b`, 'GET', 404],
    ] as const) {
      const page = await http(path, { method });
      assert.is(page.status, status, `${method} ${path}`);
      assert.is(page.headers['x-frame-options'], 'DENY', `${method} ${path}: X-Frame-Options`);
      assert.match(String(page.headers['content-security-policy']), /frame-ancestors 'none'/);
    }

    const first = await fetchShare(s.url, pub.code.toLowerCase().replace(/-/g, ' '));
    assert.ok(first.publicKey.equals(key));
    assert.is(first.email, 'Alice.Liddell@example.org');
    assert.is(first.fetchCount, 1);
    assert.ok(first.verifiedAt.getTime() <= Date.now());
    assert.is(first.expiresAt.getTime(), pub.expiresAt.getTime());
    assert.is((await fetchShare(s.url, pub.code)).fetchCount, 2);
    assert.match(s.logger.text(), /verify: share 00… confirmed by A\*\*\*@example\.org/);
    assert.not.ok(s.logger.text().includes(token), 'the token never reaches the log');
  } finally {
    await s.stop();
  }
});

test('a pending publish and its link survive a server restart', async () => {
  const { tempDir } = await import('./harness.js');
  const state = tempDir('restart');
  try {
    const first = await startTestServer({ config: { stateDir: state.path } });
    const pub = await publish(first.url, key, 'restart@example.org');
    const link = first.sink.lastLink('restart@example.org');
    await first.stop();
    const second = await startTestServer({ config: { stateDir: state.path } });
    try {
      const path = new URL(link).pathname;
      const page = await http(`${second.url}${path}`);
      assert.is(page.status, 200, 'the link is still known');
      assert.is((await http(`${second.url}${path}`, { method: 'POST' })).status, 200);
      assert.is((await fetchShare(second.url, pub.code)).email, 'restart@example.org');
    } finally {
      await second.stop();
    }
    // The used link is rebuilt from the log too: opened again after a restart, it says "already confirmed".
    const third = await startTestServer({ config: { stateDir: state.path } });
    try {
      const again = await http(`${third.url}${new URL(link).pathname}`);
      assert.is(again.status, 200);
      assert.match(again.text, /<title>Already confirmed<\/title>/);
    } finally {
      await third.stop();
    }
  } finally {
    state.remove();
  }
});

test('a browser gets HTML pages for / and unknown paths; API clients keep their 404 answers', async () => {
  const s = await startTestServer();
  const browser = { Accept: 'text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8' };
  try {
    const home = await http(`${s.url}/`, { headers: browser });
    assert.is(home.status, 200);
    assert.match(String(home.headers['content-type']), /^text\/html; charset=utf-8/);
    assert.match(home.text, /<title>stash key server<\/title>/);
    assert.match(String(home.headers['content-security-policy']), /default-src 'none'/);
    const missing = await http(`${s.url}/favicon.ico`, { headers: browser });
    assert.is(missing.status, 404);
    assert.match(String(missing.headers['content-type']), /^text\/html/);
    assert.match(missing.text, /<title>Page not found<\/title>/);
    const wrongMethod = await http(`${s.url}/v1/share`, { headers: browser });
    assert.is(wrongMethod.status, 405);
    assert.match(String(wrongMethod.headers['content-type']), /^text\/html/);
    // The API's own clients: binary for the stash client and curl's */*, JSON when asked.
    for (const [accept, type] of [
      [BINARY, BINARY],
      ['*/*', BINARY],
      [undefined, BINARY],
      ['application/json', 'application/json'],
    ] as const) {
      for (const path of ['/', '/nope']) {
        const r = await http(`${s.url}${path}`, accept ? { headers: { Accept: accept } } : {});
        assert.is(r.status, 404, `${path} ${accept}`);
        assert.ok(
          String(r.headers['content-type']).startsWith(type),
          `${path} ${accept}: ${String(r.headers['content-type'])}`,
        );
      }
    }
  } finally {
    await s.stop();
  }
});

test('JSON for curl: create, fetch, errors, status and topology', async () => {
  const s = await startTestServer();
  try {
    const created = await postJson(s.url, {
      op: 'create',
      public_key: key.toString('base64'),
      email: 'bob@example.org',
    });
    assert.is(created.status, 201);
    assert.match(String(created.headers['content-type']), /^application\/json/);
    const c = created.json();
    assert.is(c.type, 'created');
    assert.is(c.verification, 'sent');
    assert.match(c.expires_at, /^\d{4}-\d\d-\d\dT/);
    const pending = await postJson(s.url, { op: 'fetch', code: c.code });
    assert.is(pending.status, 409);
    assert.equal(pending.json().error.code, 'SHARE_PENDING');
    await http(s.sink.lastLink('bob@example.org'), { method: 'POST' });
    const fetched = await postJson(s.url, { op: 'fetch', code: c.code });
    assert.is(fetched.status, 200);
    const f = fetched.json();
    assert.equal(Object.keys(f).sort(), [
      'code',
      'email',
      'expires_at',
      'fetch_count',
      'public_key',
      'type',
      'verified_at',
    ]);
    assert.is(f.public_key, key.toString('base64'));
    assert.is(f.fetch_count, 1);
    await new Promise((r) => setTimeout(r, 50)); // the coalesced fetch-count record lands

    const st = await http(`${s.url}/v1/status`, { headers: { Accept: 'application/json' } });
    assert.is(st.status, 200);
    const sj = st.json();
    assert.is(sj.replication_pending, 0);
    assert.ok(sj.replication_last_sequence >= 2);
    assert.is(sj.shares_live, 1);
    assert.is(sj.shares_pending, 0);
    assert.ok(sj.store_bytes > 8);
    const bin = await http(`${s.url}/v1/status`);
    assert.is(bin.headers['content-type'], BINARY, 'binary by default');
    const decoded = decodeStatus(bin.body, (m) => new Error(m));
    assert.is(decoded.replication_last_sequence, sj.replication_last_sequence);
    assert.is(sj.store_skipped_ranges, 0);
    assert.equal(sj.store_skipped, [], 'JSON lists what the start-up check skipped');
    assert.is(sj.store_damaged_copy, null);
    const {
      replication_peers: peers,
      store_skipped: _skipped,
      store_damaged_copy: _copy,
      config_reload_error: _reload,
      ...fields
    } = sj;
    assert.equal(peers, [], 'JSON adds per-peer lag; no peers configured');
    assert.equal(await status(s.url), { ...fields, uptime_seconds: decoded.uptime_seconds });

    const top = await http(`${s.url}/v1/topology`, { headers: { Accept: 'application/json' } });
    assert.equal(top.json(), {
      cluster_id: 'default',
      topology_version: 1,
      server_id: 0,
      servers: [{ id: 0, url: s.url, status: 'active' }],
      routes: [],
      promoted_owners: [],
    });
    assert.equal(decodeTopology((await http(`${s.url}/v1/topology`)).body, (m) => new Error(m)).servers[0]!.url, s.url);
  } finally {
    await s.stop();
  }
});

test('topology, routes and the locator follow the configuration', async () => {
  const s = await startTestServer({
    config: {
      serverId: 3,
      clusterId: 'eu',
      topologyVersion: 4,
      topologyServers: [
        { id: 3, url: 'https://a.example.org', status: 'active' },
        { id: 7, url: 'https://b.example.org', status: 'standby' },
        { id: 5, url: 'https://c.example.org', status: 'disabled' },
      ],
      routes: [{ owner: 3, primary: 3, failovers: [7] }],
      promotedOwners: [7],
      shareTtlSeconds: 86400,
    },
  });
  try {
    const t = await topology(s.url);
    assert.is(t.clusterId, 'eu');
    assert.is(t.topologyVersion, 4);
    assert.is(t.serverId, 3);
    assert.equal(
      t.servers.map((x) => `${x.id}:${x.status}`),
      ['3:active', '7:standby', '5:disabled'],
    );
    assert.equal(t.routes, [{ owner: 3, primary: 3, failovers: [7] }]);
    assert.equal(t.promotedOwners, [7]);
    const pub = await publish(s.url, key, 'carol@example.org');
    assert.ok(pub.code.startsWith('37-'), `primary 3, ring successor 7 (5 is disabled): ${pub.code}`);
    assert.ok(Math.abs(pub.expiresAt.getTime() - Date.now() - 86_400_000) < 5_000, '--share-ttl');
  } finally {
    await s.stop();
  }
});

test('expired shares are gone; a late confirmation link is invalid', async () => {
  const clock = new ManualClock(Date.now());
  const s = await startTestServer({ clock });
  try {
    const a = await publish(s.url, key, 'dave@example.org');
    const b = await publish(s.url, key, 'erin@example.org');
    await http(s.sink.lastLink('dave@example.org'), { method: 'POST' });
    clock.advance(900_000);
    await rejects(fetchShare(s.url, a.code), 'SHARE_EXPIRED', /expired/);
    const late = await http(s.sink.lastLink('erin@example.org'), { method: 'POST' });
    assert.is(late.status, 404);
    await rejects(fetchShare(s.url, b.code), 'SHARE_EXPIRED');
    await s.store.sweep();
    assert.is(s.store.stats().sharesLive, 0);
    const expired = await postJson(s.url, { op: 'fetch', code: a.code });
    assert.ok(expired.status === 410 || expired.status === 404, String(expired.status));
  } finally {
    await s.stop();
  }
});

test('unknown and mistyped codes: 404 vs 400 CODE_TYPO, checked locally by the client too', async () => {
  const s = await startTestServer();
  try {
    const unknown = generateShareCode(0, 0).display;
    await rejects(fetchShare(s.url, unknown), 'SHARE_NOT_FOUND', /no share with this code/);
    const typo = unknown.slice(0, 4) + (unknown[4] === '7' ? '8' : '7') + unknown.slice(5);
    const res = await postJson(s.url, { op: 'fetch', code: typo });
    assert.is(res.status, 400);
    assert.is(res.json().error.code, 'CODE_TYPO');
    assert.match(res.json().error.message, /typo/);
    const binary = await postBinary(s.url, encodeShareRequest({ op: 'fetch', code: typo }));
    assert.is(binary.status, 400);
    // The client refuses before any request: the server log sees nothing.
    const before = s.keyServer.limiters.requests.entries;
    await rejects(fetchShare('http://127.0.0.1:9', typo), 'CODE_TYPO');
    assert.is(s.keyServer.limiters.requests.entries, before);
  } finally {
    await s.stop();
  }
});

test('mail command: failure and timeout are reported to the publisher and logged without the token', async () => {
  const s = await startTestServer({ mailTimeoutMs: 500 });
  try {
    s.sink.failNext(true);
    const failed = await publish(s.url, key, 'frank@example.org');
    assert.is(failed.verification, 'failed');
    assert.match(failed.message, /could not be sent \(exit status 3\)/);
    const log = s.logger.text();
    assert.match(
      log,
      /mail: verification command for f\*\*\*@example\.org failed: exit status 3; output: mail relay refused for f\*\*\*@example\.org \(also f\*\*\*@example\.org\): http:\/\/127\.0\.0\.1:\d+\/verify\/\[token\]/,
    );
    assert.not.match(
      log.toLowerCase(),
      /frank@example\.org/,
      'the full address is never logged, even when the mail program prints it',
    );
    s.sink.failNext(false);
    s.sink.hang(5);
    const started = Date.now();
    const slow = await publish(s.url, key, 'grace@example.org');
    assert.is(slow.verification, 'failed');
    assert.match(slow.message, /timed out/);
    assert.ok(Date.now() - started < 3000, 'the command was killed at the timeout');
    s.sink.hang(undefined);
    const ok = await publish(s.url, key, 'heidi@example.org');
    assert.is(ok.verification, 'sent');
    const lines = s.sink.env().trim().split('\n');
    const env = lines.map((l) => l.split('=')[0]).filter((k) => k !== 'PWD' && k !== 'SHLVL' && k !== '_');
    assert.equal(env.sort(), ['LANG', 'PATH', 'STASH_MAIL_KIND'], `minimal environment: ${env.join(' ')}`);
    assert.ok(lines.includes('STASH_MAIL_KIND=verify'), 'the mail says which link it carries');
  } finally {
    await s.stop();
  }
});

test('addresses that could be mistaken for options never reach the mail command', async () => {
  const s = await startTestServer();
  try {
    for (const email of [
      '-oProxyCommand=x@example.org',
      'a b@example.org',
      'a@example.org\n-x',
      'a@-example.org',
      '"a"@example.org',
      'a@example',
    ]) {
      const res = await postJson(s.url, { op: 'create', public_key: key.toString('base64'), email });
      assert.is(res.status, 400, email);
      assert.is(res.json().error.code, 'INVALID_EMAIL', email);
    }
    assert.is(s.sink.mails().length, 0);
  } finally {
    await s.stop();
  }
});

test('developer mode without a mail command prints the link; without either, the publisher is told', async () => {
  const { startServer } = await import('../../src/keyserver/server.js');
  const { defaultConfig } = await import('../../src/keyserver/cli/options.js');
  const { tempDir, MemoryLogger } = await import('./harness.js');
  const dir = tempDir('dev');
  const printed: string[] = [];
  const out = { write: (s: string) => printed.push(s) } as unknown as NodeJS.WritableStream;
  try {
    const dev = await startServer({
      config: { ...defaultConfig(), bind: { host: '127.0.0.1', port: 0 }, stateDir: dir.path, developer: true },
      logger: new MemoryLogger(),
      console: out,
    });
    const pub = await publish(dev.url, key, 'ivan@example.org');
    assert.is(pub.verification, 'printed');
    assert.match(
      printed.join(''),
      new RegExp(`verification link for i\\*\\*\\*@example\\.org: ${dev.url}/verify/[A-Za-z0-9_-]{43}\\n`),
    );
    await dev.close();
    const logger = new MemoryLogger();
    const plain = await startServer({
      config: { ...defaultConfig(), bind: { host: '127.0.0.1', port: 0 }, stateDir: dir.path },
      logger,
    });
    const none = await publish(plain.url, key, 'judy@example.org');
    assert.is(none.verification, 'failed');
    assert.match(none.message, /no verification email command configured/);
    assert.match(logger.text(), /WARN no --verification-email-command/);
    await plain.close();
  } finally {
    dir.remove();
  }
});

test.run();
