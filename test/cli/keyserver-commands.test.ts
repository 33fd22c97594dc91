/**
 * `stash vault identity publish` and `stash vault contact receive` end to end:
 * the real CLI (dist/) against real key servers on loopback, the link
 * confirmed with the POST of the verification page. Publish -> confirm ->
 * receive adds the contact only on a fingerprint match; a mismatch, a pending,
 * unknown, mistyped or expired code add nothing and say why; the primary down
 * and the failover up; the server URL from --server, STASH_KEY_SERVER_URL or
 * key_server_url (in that order); no URL at all; --json shapes; doctor.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer as createHttpServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { generateShareCode } from '../../src/keyserver/share-code.js';
import {
  BINARY_MEDIA_TYPE,
  decodeShareRequest,
  encodeError,
  encodeShareResponse,
  encodeTopology,
} from '../../src/keyserver/wire/messages.js';
import { haveCommand, needFacility } from '../helpers/facility.js';
import { ManualClock, startTestServer, tempDir, type TestServer } from '../keyserver/harness.js';
import { cliEnv, havePty, snapshot, type CliEnv, type RunResult } from './harness.js';
import {
  confirmHttps,
  confirmLink,
  deadUrl,
  ptyAsync,
  startPlainServer,
  startRoutedServer,
  testCa,
} from './keyserver-harness.js';

const clock = new ManualClock(Date.now());
let server: TestServer;
let dead: string;
let alice: CliEnv;
let bob: CliEnv;
let aliceFp: string;
let aliceX25519: string;

/** Runs stash as `t`, the password from its file. */
const as = (t: CliEnv, args: string[], env: NodeJS.ProcessEnv = {}): Promise<RunResult> =>
  t.run(args, { env: { STASH_PASSWORD_FILE: t.pwFile, ...env } });

/** Alice publishes for `email` on `url` (--json) and the link is confirmed unless told otherwise. */
async function published(
  email: string,
  opts: { url?: string; on?: TestServer; confirm?: boolean } = {},
): Promise<{ code: string; json: Record<string, unknown> }> {
  const on = opts.on ?? server;
  const r = await as(alice, [
    'vault',
    'identity',
    'publish',
    '--email',
    email,
    '--server',
    opts.url ?? on.url,
    '--json',
  ]);
  assert.is(r.code, 0, r.stderr);
  const json = JSON.parse(r.stdout) as Record<string, unknown>;
  if (opts.confirm !== false) await confirmLink(on, email);
  return { code: String(json.code), json };
}

const receive = (code: string, extra: string[], env: NodeJS.ProcessEnv = {}) =>
  as(bob, ['vault', 'contact', 'receive', code, '--server', server.url, ...extra], env);

async function contactNames(): Promise<string[]> {
  const r = await as(bob, ['vault', 'contact', 'list', '--json']);
  assert.is(r.code, 0, r.stderr);
  return (JSON.parse(r.stdout) as Array<{ name: string }>).map((c) => c.name);
}

async function removeContact(name: string): Promise<void> {
  const r = await as(bob, ['vault', 'contact', 'remove', name]);
  assert.is(r.code, 0, r.stderr);
}

test.before(async () => {
  server = await startPlainServer(clock);
  dead = await deadUrl();
  alice = cliEnv();
  bob = cliEnv();
  await alice.initVault();
  await bob.initVault();
  const id = JSON.parse((await alice.run(['vault', 'identity', 'show', '--json'])).stdout) as {
    fingerprint: string;
    x25519: string;
  };
  aliceFp = id.fingerprint;
  aliceX25519 = id.x25519;
});

test.after(async () => {
  await alice?.dispose();
  await bob?.dispose();
  await server?.stop();
});

test('publish: prints the share code, "check your email" and the expiry; the server mailed the link', async () => {
  const r = await as(alice, ['vault', 'identity', 'publish', '--email', 'alice@example.test', '--server', server.url]);
  assert.is(r.code, 0, r.stderr);
  assert.match(r.stdout, /^Share code: {2}[0-9A-V]{2}-[0-9A-Z]{4}-[0-9A-Z]{4}-[0-9A-Z]{4}-[0-9A-Z]$/m);
  assert.match(r.stdout, /^Expires: {5}\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z \(in 1[45]m \d\ds\)$/m);
  assert.match(
    r.stdout,
    /^Check your email: a verification link was sent to a\*\*\*@example\.test; open it and confirm\.$/m,
  );
  assert.ok(r.stdout.includes(aliceFp), 'the fingerprint to read aloud is shown');
  assert.match(server.sink.lastLink('alice@example.test'), new RegExp(`^${server.url}/verify/[A-Za-z0-9_-]{43}$`));
});

test('publish --json: server, code, email, fingerprint, expiresAt, verification, message', async () => {
  const { json } = await published('alice-json@example.test', { confirm: false });
  assert.equal(Object.keys(json).sort(), [
    'code',
    'email',
    'expiresAt',
    'fingerprint',
    'message',
    'server',
    'verification',
  ]);
  assert.is(json.server, server.url);
  assert.is(json.email, 'alice-json@example.test');
  assert.is(json.fingerprint, aliceFp);
  assert.is(json.verification, 'sent');
  assert.ok(Math.abs(Date.parse(String(json.expiresAt)) - clock.now() - 15 * 60_000) < 2000, 'expires in 15 minutes');
});

test('receive: pending until the link is confirmed (75, nothing added); then a matching fingerprint adds the contact', async () => {
  const { code } = await published('alice-flow@example.test', { confirm: false });
  const pending = await receive(code, ['--fingerprint', aliceFp, '--name', 'alice']);
  assert.is(pending.code, 75, pending.stderr);
  assert.match(
    pending.stderr,
    /^stash: this share is pending verification: the publisher has not confirmed the email link yet\n$/,
  );
  assert.equal(await contactNames(), []);

  await confirmLink(server, 'alice-flow@example.test');
  // Grouping, spaces and case do not matter.
  const typed = aliceFp.toLowerCase().replace(/-/g, ' ');
  const r = await receive(code.toLowerCase(), ['--fingerprint', typed, '--name', 'alice']);
  assert.is(r.code, 0, r.stderr);
  assert.match(r.stdout, /^Published by: alice-flow@example\.test \(address verified /m);
  assert.ok(
    r.stdout.includes(`Fingerprint matches: ${aliceFp}\nAdded contact alice <alice-flow@example.test>\n`),
    r.stdout,
  );
  const shown = JSON.parse((await as(bob, ['vault', 'contact', 'show', 'alice', '--json'])).stdout) as Record<
    string,
    string
  >;
  assert.is(shown.fingerprint, aliceFp);
  assert.is(shown.x25519, aliceX25519, "the contact holds Alice's real key");
  assert.is(shown.email, 'alice-flow@example.test');

  const again = await receive(code, ['--fingerprint', aliceFp, '--name', 'alice-again']);
  assert.is(again.code, 73, 'the same key twice is refused');
  assert.match(again.stderr, /this key is already saved as contact "alice"/);
  // A wrong fingerprint is reported as such even when the key is saved already: it may be a wrong key.
  const groups = aliceFp.split('-');
  groups[0] = groups[0] === '0000' ? '1111' : '0000';
  const wrong = await receive(code, ['--fingerprint', groups.join('-'), '--name', 'alice']);
  assert.is(wrong.code, 65, wrong.stderr);
  assert.match(wrong.stderr, /^stash: fingerprint mismatch: /m);
  assert.not.match(wrong.stderr, /already/);
  await removeContact('alice');
});

test('receive --json: the share, the servers tried, the match and the contact', async () => {
  const { code } = await published('alice-rj@example.test');
  const r = await receive(code, ['--fingerprint', aliceFp, '--json']);
  assert.is(r.code, 0, r.stderr);
  const json = JSON.parse(r.stdout) as Record<string, any>;
  assert.equal(Object.keys(json).sort(), [
    'code',
    'contact',
    'email',
    'expiresAt',
    'fetchCount',
    'fingerprint',
    'match',
    'server',
    'tried',
    'verifiedAt',
  ]);
  assert.is(json.code, code);
  assert.is(json.server, server.url);
  assert.equal(json.tried, [{ id: 0, url: server.url }]);
  assert.is(json.fetchCount, 1);
  assert.is(json.match, true);
  assert.is(json.fingerprint, aliceFp);
  assert.equal(Object.keys(json.contact).sort(), ['addedAt', 'email', 'fingerprint', 'name']);
  assert.is(json.contact.name, 'alice-rj@example.test', 'the name defaults to the verified address');
  await removeContact('alice-rj@example.test');
});

test('fingerprint mismatch: clear refusal, exit 65, the vault is unchanged', async () => {
  const { code } = await published('alice-mm@example.test');
  const groups = aliceFp.split('-');
  groups[5] = groups[5] === '0000' ? '1111' : '0000';
  const before = snapshot(bob.vault);
  const r = await receive(code, ['--fingerprint', groups.join('-'), '--name', 'mallory']);
  assert.is(r.code, 65);
  assert.match(
    r.stderr,
    /^stash: fingerprint mismatch: the key published by alice-mm@example\.test is not the one whose fingerprint you were given; no contact was added\./m,
  );
  assert.equal(snapshot(bob.vault), before);
  assert.equal(await contactNames(), []);
});

test('bad input is refused before any request: a mistyped code (64), a malformed fingerprint (64), no terminal and no --fingerprint (64)', async () => {
  const { code } = await published('alice-bad@example.test');
  const typo = `${code.slice(0, -1)}${code.endsWith('0') ? '1' : '0'}`;
  const r1 = await receive(typo, ['--fingerprint', aliceFp]);
  assert.is(r1.code, 64);
  assert.match(r1.stderr, /^stash: this share code has a typo/);
  const r2 = await receive(code, ['--fingerprint', 'ABCD-EFGH']);
  assert.is(r2.code, 64);
  assert.match(r2.stderr, /^stash: a fingerprint has 24 characters \(6 groups of 4\); this one has 8/);
  const r3 = await receive(code, []);
  assert.is(r3.code, 64);
  assert.match(r3.stderr, /^stash: no terminal to ask for the publisher's fingerprint: give it with --fingerprint FP/);
  // None of them fetched: the first real fetch is number 1.
  const r4 = await receive(code, ['--fingerprint', aliceFp, '--json']);
  assert.is(r4.code, 0, r4.stderr);
  assert.is(JSON.parse(r4.stdout).fetchCount, 1);
  await removeContact('alice-bad@example.test');
});

test('unknown code: 66 with a clear message, nothing added', async () => {
  const r = await receive(generateShareCode(0, 0).display, ['--fingerprint', aliceFp]);
  assert.is(r.code, 66);
  assert.match(
    r.stderr,
    /^stash: no share with this code is known here \(it may have expired\); ask the publisher for a new code\n$/,
  );
  assert.equal(await contactNames(), []);
});

test('on a terminal the fingerprint is asked; a line that is no fingerprint is asked again', async () => {
  if (!needFacility(havePty(), 'pseudo-terminal', '/usr/bin/python3 with the pty module is missing')) return;
  const { code } = await published('alice-tty@example.test');
  const r = await ptyAsync(
    bob,
    ['vault', 'contact', 'receive', code, '--name', 'alice-tty', '--server', server.url, '--password-file', bob.pwFile],
    [
      ['gave you \\(XXXX-XXXX-XXXX-XXXX-XXXX-XXXX\\): ', 'not a fingerprint'],
      ['try again\\.[\\s\\S]*gave you \\(XXXX-XXXX-XXXX-XXXX-XXXX-XXXX\\): ', aliceFp.toLowerCase()],
    ],
  );
  assert.is(r.status, 0, r.output);
  assert.is(r.answered, 2);
  assert.match(r.output, /Published by: alice-tty@example\.test/);
  assert.match(r.output, /Added contact alice-tty <alice-tty@example\.test>/);
  await removeContact('alice-tty');
});

test('failover: the primary of the route is down, the failover answers', async () => {
  // Server 0 is down; the operator promoted server 1 for owner 1 (failover step 1).
  const routed = await startRoutedServer({
    serverId: 1,
    others: [{ id: 0, url: dead, status: 'active' }],
    routes: [{ owner: 1, primary: 0, failovers: [1] }],
    promotedOwners: [1],
  });
  try {
    const { code } = await published('alice-fo@example.test', { on: routed });
    assert.match(code, /^10-/);
    const r = await as(bob, [
      'vault',
      'contact',
      'receive',
      code,
      '--server',
      routed.url,
      '--fingerprint',
      aliceFp,
      '--name',
      'alice-fo',
      '--json',
    ]);
    assert.is(r.code, 0, r.stderr);
    const json = JSON.parse(r.stdout) as { server: string; tried: Array<{ id: number; url: string; error?: string }> };
    assert.is(json.server, routed.url);
    assert.is(json.tried.length, 2);
    assert.equal(
      [json.tried[0]!.id, json.tried[0]!.url, json.tried[1]!.id, json.tried[1]!.url],
      [0, dead, 1, routed.url],
    );
    assert.match(json.tried[0]!.error ?? '', /ECONNREFUSED/);
    assert.match(r.stderr, new RegExp(`server 0 ${dead} did not answer .*; tried the next one on the route`));
    await removeContact('alice-fo');
  } finally {
    await routed.stop();
  }
});

test('server URL: --server, else STASH_KEY_SERVER_URL, else key_server_url; invalid values name their source', async () => {
  const configDir = join(alice.env.XDG_CONFIG_HOME!, 'stash');
  const configFile = join(configDir, 'config.toml');
  mkdirSync(configDir, { recursive: true });
  const serverOf = async (args: string[], env: NodeJS.ProcessEnv): Promise<RunResult> =>
    as(alice, ['vault', 'identity', 'publish', '--email', 'alice-url@example.test', '--json', ...args], env);
  try {
    writeFileSync(configFile, `key_server_url = "${server.url}/"\n`);
    const fromFile = await serverOf([], {});
    assert.is(fromFile.code, 0, fromFile.stderr);
    assert.is(JSON.parse(fromFile.stdout).server, server.url);

    writeFileSync(configFile, `key_server_url = "${dead}"\n`);
    const fromEnv = await serverOf([], { STASH_KEY_SERVER_URL: server.url });
    assert.is(fromEnv.code, 0, fromEnv.stderr);
    assert.is(JSON.parse(fromEnv.stdout).server, server.url);

    const fromFlag = await serverOf(['--server', server.url], { STASH_KEY_SERVER_URL: dead });
    assert.is(fromFlag.code, 0, fromFlag.stderr);
    assert.is(JSON.parse(fromFlag.stdout).server, server.url);

    const fileWins = await serverOf([], {});
    assert.is(fileWins.code, 69, 'the dead URL from the file was used');
    assert.match(
      fileWins.stderr,
      /^stash: cannot reach the key server at http:\/\/127\.0\.0\.1:\d+ \(ECONNREFUSED\)\n$/,
    );

    writeFileSync(configFile, 'key_server_url = "ftp://keys.example.org"\n');
    const badFile = await serverOf([], {});
    assert.is(badFile.code, 78);
    assert.is(
      badFile.stderr,
      `stash: ${configFile}:1: key_server_url must start with https:// (or http:// for a server on this machine), such as https://keys.example.org; got "ftp://keys.example.org"\n`,
    );
    const badEnv = await serverOf(['--server', server.url], { STASH_KEY_SERVER_URL: 'keys.example.org' });
    assert.is(badEnv.code, 0, '--server wins without reading the environment or the file');
    rmSync(configFile);
    const badEnv2 = await serverOf([], { STASH_KEY_SERVER_URL: 'keys.example.org' });
    assert.is(badEnv2.code, 78);
    assert.match(
      badEnv2.stderr,
      /^stash: STASH_KEY_SERVER_URL must be an https:\/\/ URL \(http:\/\/ for a server on this machine\) such as https:\/\/keys\.example\.org; got "keys\.example\.org"\n$/,
    );
    const badFlag = await serverOf(['--server', 'file:///etc/passwd'], {});
    assert.is(badFlag.code, 64);
    assert.match(
      badFlag.stderr,
      /^stash: --server must start with https:\/\/ \(or http:\/\/ for a server on this machine\)/,
    );
  } finally {
    rmSync(configFile, { force: true });
  }
});

test('no URL anywhere: exit 64 naming the three ways, before any password is read', async () => {
  for (const args of [
    ['vault', 'identity', 'publish', '--email', 'a@example.test'],
    ['vault', 'contact', 'receive', generateShareCode(0, 0).display, '--fingerprint', aliceFp],
  ]) {
    const r = await alice.run(args); // no password source either: the URL error comes first
    assert.is(r.code, 64, r.stderr);
    assert.is(
      r.stderr,
      `stash: no key server configured: give --server URL, set STASH_KEY_SERVER_URL, or add key_server_url = "https://..." to ${join(alice.env.XDG_CONFIG_HOME!, 'stash', 'config.toml')}\n`,
    );
  }
});

test('publish: a failing mail command is reported (69)', async () => {
  server.sink.failNext(true);
  try {
    const r = await as(alice, [
      'vault',
      'identity',
      'publish',
      '--email',
      'alice-nomail@example.test',
      '--server',
      server.url,
    ]);
    assert.is(r.code, 69);
    assert.match(
      r.stderr,
      /^stash: the key was stored but cannot be received: the verification email could not be sent \(exit status 3\); publish again later\n$/,
    );
    assert.is(r.stdout, '');
  } finally {
    server.sink.failNext(false);
  }
});

test('publish over a rate limit: 75 and the message says which limit', async () => {
  const limited = await startTestServer({ config: { verificationEmailRateLimitPerHour: 1 } });
  try {
    const args = ['vault', 'identity', 'publish', '--email', 'alice-rl@example.test', '--server', limited.url];
    assert.is((await as(alice, args)).code, 0);
    const r = await as(alice, args);
    assert.is(r.code, 75);
    assert.match(
      r.stderr,
      /^stash: too many verification emails for this address \(limit: 1 per hour\); try again in \d+ minutes?\n$/,
    );
    assert.is(limited.sink.mails().length, 1, 'no second mail was sent');
  } finally {
    await limited.stop();
  }
});

test('a hostile server: control characters in its address are refused, in its messages neutralised', async () => {
  // A stand-in, because a real server never sends these: it validates addresses and writes its own messages.
  const alicePublicKey = Buffer.from(
    JSON.parse((await alice.run(['vault', 'identity', 'show', '--json'])).stdout).publicKey,
    'base64url',
  );
  let mode: 'email' | 'error' = 'email';
  const hostile = createHttpServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      res.setHeader('Content-Type', BINARY_MEDIA_TYPE);
      if (req.method === 'GET') {
        const url = `http://127.0.0.1:${(hostile.address() as AddressInfo).port}`;
        res.end(
          encodeTopology({
            clusterId: 'x',
            topologyVersion: 1,
            serverId: 0,
            servers: [{ id: 0, url, status: 'active' }],
            routes: [],
            promotedOwners: [],
          }),
        );
        return;
      }
      const request = decodeShareRequest(Buffer.concat(chunks), (m) => new Error(m));
      const code = request.op === 'fetch' ? request.code : '';
      if (mode === 'error') {
        res.statusCode = 404;
        res.end(
          encodeError({ code: 'SHARE_NOT_FOUND', message: 'gone\x1b[2J\x1b[31m red\u202e', retryAfter: 0, limit: '' }),
        );
        return;
      }
      res.end(
        encodeShareResponse({
          type: 'fetched',
          code,
          publicKey: alicePublicKey,
          email: 'alice@example.test\x1b[2K\rbob@example.test',
          verifiedAt: Date.now(),
          fetchCount: 1,
          expiresAt: Date.now() + 60_000,
        }),
      );
    });
  });
  await new Promise<void>((ok) => hostile.listen(0, '127.0.0.1', ok));
  const url = `http://127.0.0.1:${(hostile.address() as AddressInfo).port}`;
  try {
    const code = generateShareCode(0, 0).display;
    const r1 = await as(bob, [
      'vault',
      'contact',
      'receive',
      code,
      '--server',
      url,
      '--fingerprint',
      aliceFp,
      '--name',
      'evil',
    ]);
    assert.is(r1.code, 76, r1.stderr);
    assert.is(
      r1.stderr,
      'stash: the key server sent an address that is not a plain email address; nothing was added\n',
    );
    assert.not.match(r1.stdout, /\x1b/);
    assert.equal(await contactNames(), []);
    mode = 'error';
    const r2 = await as(bob, ['vault', 'contact', 'receive', code, '--server', url, '--fingerprint', aliceFp]);
    assert.is(r2.code, 66);
    assert.is(r2.stderr, 'stash: gone\ufffd[2J\ufffd[31m red\ufffd\n');
  } finally {
    await new Promise((done) => hostile.close(done));
  }
});

test('doctor: key server not configured (info), reachable (ok), unreachable (fail with a fix)', async () => {
  type Report = {
    checks: Array<{ section: string; name: string; status: string; detail: string; fix?: string }>;
    keyServer: Record<string, unknown>;
  };
  const doctor = async (env: NodeJS.ProcessEnv): Promise<Report> =>
    JSON.parse((await bob.run(['doctor', '--json'], { env })).stdout) as Report;
  const ks = (r: Report) => r.checks.find((c) => c.section === 'keyserver')!;
  const none = await doctor({});
  assert.is(ks(none).status, 'info');
  assert.match(ks(none).detail, /^not configured/);
  const up = await doctor({ STASH_KEY_SERVER_URL: server.url });
  assert.is(ks(up).status, 'ok', ks(up).detail);
  assert.is(
    ks(up).detail,
    `${server.url} (from STASH_KEY_SERVER_URL) answers: cluster default, topology version 1, 1 server(s)`,
  );
  assert.equal(up.keyServer, {
    url: server.url,
    from: 'STASH_KEY_SERVER_URL',
    reachable: true,
    clusterId: 'default',
    topologyVersion: 1,
    servers: 1,
  });
  const down = await doctor({ STASH_KEY_SERVER_URL: dead });
  assert.is(ks(down).status, 'fail');
  assert.match(ks(down).detail, /ECONNREFUSED/);
  assert.match(ks(down).fix ?? '', /\/v1\/topology/);
});

test('HTTPS with a private CA: trusted through NODE_EXTRA_CA_CERTS; without it the certificate is refused (77)', async () => {
  if (!needFacility(haveCommand('openssl'), 'openssl', 'needed to make a test CA (apt-get install openssl)')) return;
  const dir = tempDir('cli-tls');
  try {
    const pki = testCa(dir.path);
    const tls = await startTestServer({ config: { tlsCert: pki.cert, tlsKey: pki.key } });
    try {
      const trust = { NODE_EXTRA_CA_CERTS: pki.ca };
      const untrusted = await as(alice, [
        'vault',
        'identity',
        'publish',
        '--email',
        'alice-tls@example.test',
        '--server',
        tls.url,
      ]);
      assert.is(untrusted.code, 77);
      assert.match(
        untrusted.stderr,
        /^stash: the certificate of https:\/\/127\.0\.0\.1:\d+ is not trusted \([A-Z_]+\)\n$/,
      );
      const pub = await as(
        alice,
        ['vault', 'identity', 'publish', '--email', 'alice-tls@example.test', '--server', tls.url, '--json'],
        trust,
      );
      assert.is(pub.code, 0, pub.stderr);
      assert.is(await confirmHttps(tls.sink.lastLink('alice-tls@example.test'), readFileSync(pki.ca)), 200);
      const code = String(JSON.parse(pub.stdout).code);
      const refused = await as(bob, [
        'vault',
        'contact',
        'receive',
        code,
        '--server',
        tls.url,
        '--fingerprint',
        aliceFp,
      ]);
      assert.is(refused.code, 77, refused.stderr);
      const r = await as(
        bob,
        ['vault', 'contact', 'receive', code, '--server', tls.url, '--fingerprint', aliceFp, '--name', 'alice-tls'],
        trust,
      );
      assert.is(r.code, 0, r.stderr);
      assert.match(r.stdout, /Added contact alice-tls <alice-tls@example\.test>/);
      await removeContact('alice-tls');
    } finally {
      await tls.stop();
    }
  } finally {
    dir.remove();
  }
});

test('expired share: 66 with a clear message, nothing added (last: it moves the server clock)', async () => {
  const { code } = await published('alice-exp@example.test');
  clock.advance(16 * 60_000);
  const r = await receive(code, ['--fingerprint', aliceFp]);
  assert.is(r.code, 66);
  assert.match(r.stderr, /^stash: this share has expired or was unpublished; ask the publisher to publish again\n$/);
  assert.equal(await contactNames(), []);
});

test.run();
