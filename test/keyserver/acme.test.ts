/**
 * ACME for real against Pebble on loopback (issue 28, items 3 and 4): a
 * server process started with --acme-domain obtains its certificate over
 * TLS-ALPN-01 on its own port (Pebble validates by connecting to it), a
 * client verifies it with Pebble's root and fetches over HTTPS, the
 * short-lived certificate is renewed in every process without a restart,
 * the keys are 0600 in the state folder and never logged, `status` shows the
 * certificate; and a challenge that cannot succeed ends the start with a
 * clear line and exit status 76.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { mkdirSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { request } from 'node:https';
import type { LookupFunction } from 'node:net';
import { join } from 'node:path';
import { connect } from 'node:tls';
import { haveCommand, needFacility } from '../helpers/facility.js';
import { tempDir } from './harness.js';
import { freePorts, runServerCommand, startServerProcess, waitFor } from './cluster.js';
import { startPebble } from './pebble.js';

const DOMAIN = 'keys.stash.test';
const havePebble = () =>
  needFacility(
    ['pebble', 'pebble-challtestsrv', 'openssl'].every(haveCommand),
    'pebble',
    'apt-get install pebble openssl',
  );

/** Every name is 127.0.0.1, as Pebble's DNS says. */
const loopback: LookupFunction = (_host, options, callback) => {
  if (options.all)
    (callback as unknown as (e: null, a: Array<{ address: string; family: number }>) => void)(null, [
      { address: '127.0.0.1', family: 4 },
    ]);
  else callback(null, '127.0.0.1', 4);
};

/** A fresh handshake with SNI `name`, verified against `ca`: the serial and expiry presented, or the error code. */
function presented(port: number, name: string, ca: Buffer): Promise<{ serial: string; validTo: string }> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port, servername: name, ca }, () => {
      const c = socket.getPeerCertificate();
      socket.destroy();
      resolve({ serial: c.serialNumber, validTo: c.valid_to });
    });
    socket.on('error', reject);
  });
}

function getJson(url: string, ca: Buffer): Promise<{ status: number; json: any }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { ca, lookup: loopback, agent: false, headers: { Accept: 'application/json' } }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => {
        body += d;
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, json: JSON.parse(body) }));
    });
    req.on('error', reject);
    req.end();
  });
}

/** Every file under `dir` with its mode. */
function modes(dir: string): Array<[string, number]> {
  const out: Array<[string, number]> = [];
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    const st = statSync(path);
    out.push([path, st.mode & 0o777]);
    if (st.isDirectory()) out.push(...modes(path));
  }
  return out;
}

test("a certificate over TLS-ALPN-01 from Pebble: served in both processes, verified with Pebble's root, renewed without a restart", async () => {
  if (!havePebble()) return;
  const dir = tempDir('acme');
  const [port] = await freePorts(1);
  const pebble = await startPebble(dir.path, { tlsPort: port!, validitySeconds: 24 });
  try {
    const state = join(dir.path, 'state');
    const args = [
      '--bind',
      `127.0.0.1:${port}`,
      '--state-dir',
      state,
      '--processes',
      '2',
      '--acme-domain',
      DOMAIN,
      '--acme-email',
      'ops@stash.test',
      '--acme-directory',
      pebble.directory,
    ];
    const server = await startServerProcess(args, { ...process.env, NODE_EXTRA_CA_CERTS: pebble.listenerCaPath });
    try {
      assert.match(
        server.stderr(),
        new RegExp(`ACME: certificate for ${DOMAIN.replace(/\./g, '\\.')} obtained from ${pebble.directory}`),
      );
      const root = await pebble.root();
      const first = await presented(port!, DOMAIN, root);

      // A client that trusts Pebble's root fetches over HTTPS; the public URL defaults to the ACME name.
      const top = await getJson(`https://${DOMAIN}:${port}/v1/topology`, root);
      assert.is(top.status, 200);
      assert.is(top.json.servers[0].url, `https://${DOMAIN}:${port}`);

      // Keys 0600 and folders 0700 in the state folder; no key in the log.
      const acmeFiles = modes(join(state, 'acme'));
      assert.ok(
        acmeFiles.some(([p]) => p.endsWith('account-key.pem')) &&
          acmeFiles.some(([p]) => p.endsWith('certificate-key.pem')),
        acmeFiles.join(' '),
      );
      for (const [path, mode] of acmeFiles) assert.is(mode, statSync(path).isDirectory() ? 0o700 : 0o600, path);
      assert.not.match(server.stderr(), /PRIVATE KEY/);

      // 24 s certificates are renewed 16 s in: new connections get the new one, in both processes, from the same process tree.
      await waitFor('the renewal', async () => (await presented(port!, DOMAIN, root)).serial !== first.serial, 45_000);
      const after = await Promise.all([1, 2, 3, 4].map(() => presented(port!, DOMAIN, root)));
      assert.is(
        new Set(after.map((c) => c.serial)).size,
        1,
        'every connection, in either process, gets the renewed certificate',
      );
      assert.is.not(after[0]!.serial, first.serial);
      assert.is(server.child.exitCode, null, 'no restart');
      assert.is((server.stderr().match(/ACME: certificate for \S+ obtained/g) ?? []).length >= 2, true);
      assert.is((await getJson(`https://${DOMAIN}:${port}/v1/topology`, root)).status, 200);

      // `status` of an installed config naming this server: the certificate served and the last order.
      const etc = join(dir.path, 'root', 'etc', 'stash');
      mkdirSync(etc, { recursive: true });
      writeFileSync(
        join(etc, 'key-server.toml'),
        [
          `bind_addr = "127.0.0.1:${port}"`,
          `state_dir = "${state}"`,
          `acme_domain = "${DOMAIN}"`,
          `acme_directory = "${pebble.directory}"`,
          '',
        ].join('\n'),
      );
      const st = await runServerCommand(['status'], {
        ...process.env,
        STASH_KEY_SERVER_ROOT_PREFIX: join(dir.path, 'root'),
      });
      assert.match(
        st.stdout,
        new RegExp(
          `^certificate: names ${DOMAIN.replace(/\./g, '\\.')}; valid until \\S+ \\(\\d+ s left\\); issuer CN=Pebble Intermediate CA`,
          'm',
        ),
      );
      assert.match(
        st.stdout,
        new RegExp(
          `^acme: ${DOMAIN.replace(/\./g, '\\.')} from \\S+: certificate obtained \\S+, valid until \\S+, renewal from \\S+$`,
          'm',
        ),
      );
    } finally {
      await server.stop();
    }
    assert.is(server.child.exitCode, 0, server.stderr());

    // A restart serves the stored certificate at once: no order before it listens.
    const again = await startServerProcess(args, { ...process.env, NODE_EXTRA_CA_CERTS: pebble.listenerCaPath });
    try {
      assert.match(again.stderr(), /ACME: serving the stored certificate for keys\.stash\.test \(valid until/);
      assert.not.match(again.stderr(), /ACME: ordering/);
    } finally {
      await again.stop();
    }
  } finally {
    await pebble.stop();
    dir.remove();
  }
});

test('a challenge that fails ends the start with a clear line and exit status 76; status says why', async () => {
  if (!havePebble()) return;
  const dir = tempDir('acme-fail');
  // Pebble validates on `tlsPort`; the server listens elsewhere, as behind a firewall that closes 443.
  const [tlsPort, serverPort] = await freePorts(2);
  const pebble = await startPebble(dir.path, { tlsPort: tlsPort!, validitySeconds: 60 });
  try {
    const state = join(dir.path, 'state');
    const r = await runServerCommand(
      [
        'run',
        '--bind',
        `127.0.0.1:${serverPort}`,
        '--state-dir',
        state,
        '--acme-domain',
        DOMAIN,
        '--acme-directory',
        pebble.directory,
      ],
      { ...process.env, NODE_EXTRA_CA_CERTS: pebble.listenerCaPath },
    );
    assert.is(r.code, 76, r.stderr);
    const name = DOMAIN.replace(/\./g, '\\.');
    assert.match(
      r.stderr,
      new RegExp(
        `^stash_key_server: ACME: no certificate for ${name} from ${pebble.directory}: the TLS-ALPN-01 challenge for ${name} failed \\(.*\\): .*(refused|connect)`,
        'mi',
      ),
    );
    assert.not.match(r.stdout, /listening on/, 'it never served');

    const etc = join(dir.path, 'root', 'etc', 'stash');
    mkdirSync(etc, { recursive: true });
    writeFileSync(
      join(etc, 'key-server.toml'),
      `bind_addr = "127.0.0.1:${serverPort}"\nstate_dir = "${state}"\nacme_domain = "${DOMAIN}"\nacme_directory = "${pebble.directory}"\n`,
    );
    const st = await runServerCommand(['status'], {
      ...process.env,
      STASH_KEY_SERVER_ROOT_PREFIX: join(dir.path, 'root'),
    });
    assert.match(st.stdout, /^server: not answering/m);
    assert.match(
      st.stdout,
      new RegExp(
        `^acme: ${name} from \\S+: LAST ORDER FAILED at \\S+: the TLS-ALPN-01 challenge for ${name} failed .*; no certificate$`,
        'm',
      ),
    );
  } finally {
    await pebble.stop();
    dir.remove();
  }
});

test.run();
