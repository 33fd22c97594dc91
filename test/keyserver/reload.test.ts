/**
 * Reload without restart: a real server process, its config file rewritten,
 * SIGHUP. The promoted owner is served at once, a request in flight and a
 * keep-alive connection opened before the signal are answered after it,
 * options that need a restart are reported and kept, and a broken file
 * leaves the running configuration alone.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { createHash, randomBytes } from 'node:crypto';
import { connect, type Socket } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fetchShare, topology } from '../../src/keyserver/client.js';
import { haveCommand, needFacility } from '../helpers/facility.js';
import { generateShareCode } from '../../src/keyserver/share-code.js';
import { ShareStore } from '../../src/keyserver/store/share-store.js';
import { startTestServer, MemoryLogger, http, identityPublicKey, tempDir } from './harness.js';
import { freePorts, runServerCommand, startServerProcess, waitFor } from './cluster.js';
import { defaultConfig } from '../../src/keyserver/cli/options.js';
import { unitText } from '../../src/keyserver/install/unit.js';

/** A verified share of owner 0 in the state folder of server 1 (as replication would have left it). */
async function ownerZeroShare(dir: string): Promise<string> {
  const store = await ShareStore.open({
    dir,
    serverId: 1,
    originEpoch: 1,
    compactMinBytes: 1 << 30,
    clock: { now: () => Date.now() },
    logger: new MemoryLogger(),
    sweepIntervalMs: 0,
  });
  const code = generateShareCode(0, 1);
  const tokenHash = createHash('sha256').update(randomBytes(32)).digest();
  await store.put({
    code: code.canonical,
    publicKey: identityPublicKey(),
    email: 'owner0@example.org',
    createdAt: Date.now(),
    expiresAt: Date.now() + 3_600_000,
    tokenHash,
  });
  await store.verify(tokenHash);
  await store.close();
  return code.display;
}

/** Reads from `socket` until a whole HTTP response with a Content-Length body has arrived. */
function response(socket: Socket): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    let data = '';
    const onData = (d: Buffer) => {
      data += d.toString('latin1');
      const end = data.indexOf('\r\n\r\n');
      if (end < 0) return;
      const length = Number(/content-length: (\d+)/i.exec(data.slice(0, end))?.[1] ?? 0);
      if (data.length < end + 4 + length) return;
      socket.off('data', onData);
      socket.off('error', reject);
      resolve({ status: Number(data.slice(9, 12)), body: data.slice(end + 4, end + 4 + length) });
    };
    socket.on('data', onData);
    socket.on('error', reject);
  });
}

test('SIGHUP with a new promoted_owner: served without a restart, in-flight requests and open connections complete', async () => {
  const dir = tempDir('reload');
  const [port, otherPort] = await freePorts(2);
  const file = join(dir.path, 'key-server.toml');
  const state = join(dir.path, 'state');
  const base = [
    `bind_addr = "127.0.0.1:${port}"`,
    `state_dir = "${state}"`,
    'server_id = 1',
    'rate_limit_per_minute = 0',
    'verification_email_rate_limit_per_hour = 0',
  ];
  writeFileSync(file, `${base.join('\n')}\n`);
  const code = await ownerZeroShare(state);
  const server = await startServerProcess(['--config', file]);
  const sockets: Socket[] = [];
  try {
    const notServed = await fetchShare(server.url, code).then(
      () => undefined,
      (err: Error) => err,
    );
    assert.match(notServed?.message ?? '', /not served by server 1/);
    const before = (await http(`${server.url}/v1/status`, { headers: { Accept: 'application/json' } })).json();

    // A keep-alive connection with one answered request, and a fetch whose body is half sent.
    const open = connect(port!, '127.0.0.1');
    sockets.push(open);
    open.write('GET /v1/topology HTTP/1.1\r\nHost: x\r\nAccept: application/json\r\n\r\n');
    assert.is((await response(open)).status, 200);
    const body = JSON.stringify({ op: 'fetch', code });
    const inFlight = connect(port!, '127.0.0.1');
    sockets.push(inFlight);
    inFlight.write(
      `POST /v1/share HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nAccept: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body.slice(0, 10)}`,
    );
    await new Promise((r) => setTimeout(r, 100));

    const changed = base
      .map((l) => l.replace(String(port), String(otherPort)))
      .filter((l) => !l.startsWith('rate_limit_per_minute'));
    writeFileSync(file, `${[...changed, 'promoted_owner = 0', 'rate_limit_per_minute = 600'].join('\n')}\n`);
    server.child.kill('SIGHUP');
    await waitFor('the reload', () => /reload: configuration loaded/.test(server.stderr()));

    const answered = response(inFlight);
    inFlight.write(body.slice(10));
    const a = await answered;
    assert.is(a.status, 200, `the request in flight completes: ${a.body}`);
    assert.is(JSON.parse(a.body).email, 'owner0@example.org');
    open.write('GET /v1/topology HTTP/1.1\r\nHost: x\r\nAccept: application/json\r\n\r\n');
    const top = await response(open);
    assert.is(top.status, 200, 'the keep-alive connection opened before the reload still serves');
    assert.equal(JSON.parse(top.body).promoted_owners, [0]);

    assert.is((await fetchShare(server.url, code)).email, 'owner0@example.org', 'owner 0 served without a restart');
    assert.is(server.child.exitCode, null);
    const after = (await http(`${server.url}/v1/status`, { headers: { Accept: 'application/json' } })).json();
    assert.ok(after.config_loaded_at > before.config_loaded_at, 'status says when the configuration was loaded');
    assert.is(after.uptime_seconds >= before.uptime_seconds, true, 'the same process');
    assert.match(
      server.stderr(),
      /reload: configuration loaded; applied promoted_owner \[\] -> \[0\], rate_limit_per_minute 0 -> 600/,
    );
    assert.match(
      server.stderr(),
      new RegExp(`reload: bind_addr changed .*; it takes effect only at a restart, keeping .*${port}`),
    );

    // `stash_key_server status` asks the running server of the installed config (here under a test root).
    const root = join(dir.path, 'root');
    mkdirSync(join(root, 'etc', 'stash'), { recursive: true });
    writeFileSync(join(root, 'etc', 'stash', 'key-server.toml'), `${base.join('\n')}\n`);
    const st = await runServerCommand(['status'], { ...process.env, STASH_KEY_SERVER_ROOT_PREFIX: root });
    assert.match(
      st.stdout,
      new RegExp(
        `^server: answering at http://127\\.0\\.0\\.1:${port}/v1/status, configuration loaded ${new Date(after.config_loaded_at).toISOString()}$`,
        'm',
      ),
    );

    // A broken file: nothing changes, the log and status say why.
    writeFileSync(file, `${base.join('\n')}\nno_such_key = 1\n`);
    server.child.kill('SIGHUP');
    await waitFor('the refused reload', () =>
      /reload: the configuration was not applied: .*no_such_key/.test(server.stderr()),
    );
    assert.is((await fetchShare(server.url, code)).email, 'owner0@example.org', 'the running configuration stays');
    const refused = (await http(`${server.url}/v1/status`, { headers: { Accept: 'application/json' } })).json();
    assert.match(refused.config_reload_error, /no_such_key/);
    assert.is(refused.config_loaded_at, after.config_loaded_at);
    const st2 = await runServerCommand(['status'], { ...process.env, STASH_KEY_SERVER_ROOT_PREFIX: root });
    assert.match(st2.stdout, /^server: answering at .*; LAST RELOAD FAILED: .*no_such_key/m);
  } finally {
    for (const s of sockets) s.destroy();
    await server.stop();
    dir.remove();
  }
  assert.is(server.child.exitCode, 0, server.stderr());
});

test('reload applies limits, topology and routes in place; restart-only options and secrets are reported, never shown', async () => {
  const s = await startTestServer({
    config: { rateLimitPerMinute: 0, replicationToken: 'first-token-0123456789abcdef' },
  });
  try {
    const next = {
      ...s.config,
      publicUrl: undefined,
      rateLimitPerMinute: 60,
      rateLimitBurst: 2,
      topologyServers: [
        { id: 0, url: s.url, status: 'active' as const },
        { id: 1, url: 'http://127.0.0.1:9', status: 'standby' as const },
      ],
      routes: [{ owner: 1, primary: 0, failovers: [] }],
      serverId: 3,
      replicationToken: 'second-token-0123456789abcdef',
      stateDir: '/elsewhere',
    };
    const result = await s.reload({ ...defaultConfig(), ...next });
    assert.equal(result.needRestart.sort(), ['replication_token', 'server_id', 'state_dir']);
    assert.ok(result.applied.includes('route') && result.applied.includes('rate_limit_burst'));
    const text = s.logger.text();
    assert.not.match(text, /first-token|second-token/, 'the token is never logged');
    assert.match(text, /replication_token changed; it takes effect only at a restart/);
    assert.is(s.config.serverId, 0);
    assert.is(s.config.publicUrl, s.url, 'an unset public_url keeps the one in use');
    // The new request limit is in force: a burst of 2.
    const codes = [];
    for (let i = 0; i < 3; i++) codes.push((await http(`${s.url}/v1/topology`)).status);
    assert.equal(codes, [200, 200, 429]);
    assert.equal((await http(`${s.url}/v1/topology`, { headers: { Accept: 'application/json' } })).status, 429);
  } finally {
    await s.stop();
  }
});

/** A CA and a server certificate for 127.0.0.1 signed by it, under `name` in `dir`. */
function issue(dir: string, name: string): { ca: Buffer; cert: Buffer; key: Buffer } {
  const run = (...args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] });
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  run(
    'req',
    '-x509',
    ...ec,
    '-keyout',
    `${name}-ca.key`,
    '-out',
    `${name}-ca.pem`,
    '-days',
    '2',
    '-subj',
    `/CN=${name} CA`,
  );
  run('req', ...ec, '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', '/CN=127.0.0.1');
  writeFileSync(join(dir, 'ext.cnf'), 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n');
  run(
    'x509',
    '-req',
    '-in',
    `${name}.csr`,
    '-CA',
    `${name}-ca.pem`,
    '-CAkey',
    `${name}-ca.key`,
    '-CAcreateserial',
    '-out',
    `${name}.pem`,
    '-days',
    '2',
    '-extfile',
    'ext.cnf',
  );
  const read = (f: string) => readFileSync(join(dir, f));
  return { ca: read(`${name}-ca.pem`), cert: read(`${name}.pem`), key: read(`${name}.key`) };
}

/** A fresh TLS connection (no pooled socket, no resumed session) to `url` trusting `ca`: 'trusted' or the error code. */
function handshake(url: string, ca: Buffer): Promise<string> {
  const { port } = new URL(url);
  return new Promise((resolve) => {
    const socket = tlsConnect({ host: '127.0.0.1', port: Number(port), ca }, () => {
      socket.destroy();
      resolve('trusted');
    });
    socket.on('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message));
  });
}

test('a reload reads the TLS certificate again (a renewal); an unusable one keeps the one in use', async () => {
  if (!needFacility(haveCommand('openssl'), 'openssl', 'needed to make test certificates (apt-get install openssl)'))
    return;
  const dir = tempDir('reload-tls');
  try {
    const first = issue(dir.path, 'first');
    const renewed = issue(dir.path, 'renewed');
    const certPath = join(dir.path, 'server.pem');
    const keyPath = join(dir.path, 'server.key');
    writeFileSync(certPath, first.cert);
    writeFileSync(keyPath, first.key);
    const s = await startTestServer({ config: { tlsCert: certPath, tlsKey: keyPath } });
    try {
      assert.is((await topology(s.url, { ca: first.ca })).serverId, 0);
      writeFileSync(certPath, renewed.cert);
      writeFileSync(keyPath, renewed.key);
      const result = await s.reload({ ...defaultConfig(), ...s.config });
      assert.ok(result.applied.includes('tls_cert'));
      assert.is(await handshake(s.url, renewed.ca), 'trusted', 'new connections get the renewed certificate');
      assert.is(await handshake(s.url, first.ca), 'UNABLE_TO_VERIFY_LEAF_SIGNATURE');
      assert.is((await topology(s.url, { ca: renewed.ca })).serverId, 0);

      writeFileSync(keyPath, 'not a key\n');
      await s.reload({ ...defaultConfig(), ...s.config });
      assert.match(
        s.logger.text(),
        /ERROR reload: the TLS certificate or key cannot be used \(--tls-key \S+server\.key: not an unencrypted PEM private key .*\); keeping the one in use/,
      );
      assert.is(await handshake(s.url, renewed.ca), 'trusted', 'still serving with the renewed certificate');
    } finally {
      await s.stop();
    }
  } finally {
    dir.remove();
  }
});

test('the installed unit reloads with SIGHUP (systemctl reload; install.test.ts verifies the unit with systemd-analyze)', () => {
  const unit = unitText({ node: process.execPath, script: '/usr/lib/node_modules/stash/bin/stash_key_server.js' });
  assert.match(unit, /^ExecReload=\/bin\/kill -HUP \$MAINPID$/m);
});

test.run();
