/**
 * The installed service serves HTTPS on 443 (issue 28, item 3): `install`
 * asks for the certificate (ACME or files, as flags or in the kept config)
 * and refuses without one; files reach the DynamicUser service through
 * LoadCredential=, and the unit's own ExecStart= and Environment= lines,
 * run with the credentials where systemd would put them, serve HTTPS with
 * them. systemd-analyze verifies both units and rates them no worse than
 * before (1.5), with CAP_NET_BIND_SERVICE the only capability.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { spawn, spawnSync } from 'node:child_process';
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { request } from 'node:https';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { parseCommandLine } from '../../src/keyserver/cli/parse.js';
import { installPaths } from '../../src/keyserver/install/paths.js';
import { haveCommand, isRoot, needFacility } from '../helpers/facility.js';
import { keyServerCommand, tempDir } from './harness.js';
import { freePorts, runServerCommand } from './cluster.js';
import { issueCert, makeCa } from './test-pki.js';
import { execStart, unitEnvironment, unitLines } from './unit-lines.js';

/** systemd-analyze security's exposure of the unit before it served HTTPS on 443. */
const EXPOSURE_BEFORE_443 = 1.5;

function fakeRoot(): { path: string; remove(): void } {
  const root = tempDir('root-https');
  for (const d of ['etc/systemd/system', 'var/lib', 'var/cache', 'var/log'])
    mkdirSync(join(root.path, d), { recursive: true });
  return root;
}

function tree(root: string): string[] {
  const out: string[] = [];
  const walk = (dir: string) => {
    for (const name of readdirSync(dir)) {
      const path = join(dir, name);
      out.push(relative(root, path));
      if (statSync(path).isDirectory()) walk(path);
    }
  };
  walk(root);
  return out.sort();
}

const env = (root: string) => ({ ...process.env, STASH_KEY_SERVER_ROOT_PREFIX: root });

/** verify (no warnings) and the exposure rating of a unit file. */
function analyze(unitFile: string): number {
  const verify = spawnSync('systemd-analyze', ['verify', unitFile], { encoding: 'utf8' });
  assert.is(verify.status, 0, verify.stderr);
  assert.is(verify.stderr.trim(), '', 'no warnings');
  const security = spawnSync('systemd-analyze', ['security', '--offline=yes', unitFile], { encoding: 'utf8' });
  const m = /Overall exposure level for stash-key-server\.service: ([0-9.]+) (\w+)/.exec(security.stdout);
  assert.ok(m, security.stdout + security.stderr);
  return Number(m![1]);
}

test('install without a certificate is refused and writes nothing; with ACME the config binds 443 and names it, the unit is unchanged', async () => {
  if (!needFacility(isRoot, 'root', 'install refuses to run without root')) return;
  const root = fakeRoot();
  try {
    const before = tree(root.path);
    const none = await runServerCommand(['install'], env(root.path));
    assert.is(none.code, 64, none.stderr);
    assert.match(
      none.stderr,
      /^stash_key_server: install needs the certificate the service will serve on port 443: --acme-domain NAME \[--acme-email ADDR\] .* or --tls-cert PATH --tls-key PATH/,
    );
    assert.equal(tree(root.path), before, 'nothing written');
    const both = await runServerCommand(
      ['install', '--acme-domain', 'keys.example.org', '--tls-cert', '/c.pem', '--tls-key', '/k.pem'],
      env(root.path),
    );
    assert.is(both.code, 64);
    assert.match(both.stderr, /give --acme-domain .* or --tls-cert\/--tls-key .*, not both/);

    const flags = [
      '--acme-domain',
      'keys.example.org',
      '--acme-domain',
      'keys2.example.org',
      '--acme-email',
      'ops@example.org',
    ];
    const r = await runServerCommand(['install', ...flags], env(root.path));
    assert.is(r.code, 0, r.stderr);
    assert.match(
      r.stdout,
      /^certificate: over ACME for keys\.example\.org, keys2\.example\.org \(TLS-ALPN-01 on port 443/m,
    );
    const p = installPaths(root.path);
    const inv = parseCommandLine(['run', '--config', p.config]);
    assert.ok(inv.command === 'run');
    assert.equal(
      [inv.config.bind, inv.config.acmeDomains, inv.config.acmeEmail],
      [{ host: '0.0.0.0', port: 443 }, ['keys.example.org', 'keys2.example.org'], 'ops@example.org'],
    );
    const unit = readFileSync(p.unit, 'utf8');
    assert.equal(execStart(unit).slice(2), [
      'run',
      '--processes',
      'auto',
      '--config',
      '/etc/stash/key-server.toml',
      '--log-file',
      '/var/log/stash-key-server/server.log',
      '--replication-token-file',
      '%d/replication-token',
    ]);
    assert.equal(unitLines(unit, 'LoadCredential'), [['replication-token:/etc/stash/replication-token']]);
    assert.match(unit, /^RestartPreventExitStatus=76$/m);
    assert.equal(unitLines(unit, 'CapabilityBoundingSet'), [['CAP_NET_BIND_SERVICE']]);
    if (needFacility(haveCommand('systemd-analyze'), 'systemd-analyze', 'apt-get install systemd')) {
      const score = analyze(p.unit);
      assert.ok(score <= EXPOSURE_BEFORE_443, `exposure ${score} (was ${EXPOSURE_BEFORE_443})`);
    }

    // Again with the same flags: fine. With others: the kept config would say something else.
    assert.is((await runServerCommand(['install', ...flags], env(root.path))).code, 0);
    const other = await runServerCommand(['install', '--acme-domain', 'elsewhere.example.org'], env(root.path));
    assert.is(other.code, 64);
    assert.match(
      other.stderr,
      /key-server\.toml exists and is kept, with another certificate \(acme\): give --force-config/,
    );
    const forced = await runServerCommand(
      ['install', '--acme-domain', 'elsewhere.example.org', '--force-config'],
      env(root.path),
    );
    assert.is(forced.code, 0, forced.stderr);
    assert.match(readFileSync(p.config, 'utf8'), /^acme_domain = \["elsewhere\.example\.org"\]$/m);
  } finally {
    root.remove();
  }
});

test("install --tls-cert/--tls-key: systemd hands the files over, and the unit's own command line serves HTTPS with them", async () => {
  if (
    !needFacility(
      isRoot && haveCommand('openssl'),
      'root and openssl',
      'install refuses to run without root; openssl makes the test CA',
    )
  )
    return;
  const root = fakeRoot();
  const pki = tempDir('install-pki');
  const credentials = mkdtempSync(join(tmpdir(), 'stash-ks-cred-'));
  try {
    const ca = makeCa(pki.path);
    const files = issueCert(ca, { keyType: 'rsa' });
    const missing = await runServerCommand(
      ['install', '--tls-cert', join(pki.path, 'nope.pem'), '--tls-key', files.keyPath],
      env(root.path),
    );
    assert.is(missing.code, 78, 'a missing file is named before anything is written');
    assert.match(missing.stderr, /--tls-cert \S+nope\.pem: cannot read the file \(ENOENT\)/);

    const r = await runServerCommand(
      ['install', '--tls-cert', files.certPath, '--tls-key', files.keyPath],
      env(root.path),
    );
    assert.is(r.code, 0, r.stderr);
    const p = installPaths(root.path);
    const unit = readFileSync(p.unit, 'utf8');
    assert.equal(execStart(unit).slice(-4), ['--tls-cert', '%d/tls-cert', '--tls-key', '%d/tls-key']);
    assert.equal(unitLines(unit, 'LoadCredential'), [
      ['replication-token:/etc/stash/replication-token'],
      [`tls-cert:${files.certPath}`],
      [`tls-key:${files.keyPath}`],
    ]);
    assert.match(readFileSync(p.config, 'utf8'), new RegExp(`^tls_key = "${files.keyPath}"$`, 'm'));
    if (needFacility(haveCommand('systemd-analyze'), 'systemd-analyze', 'apt-get install systemd')) {
      const score = analyze(p.unit);
      assert.ok(score <= EXPOSURE_BEFORE_443, `exposure ${score} (was ${EXPOSURE_BEFORE_443})`);
    }

    // What systemd does at start: each LoadCredential= file copied into the credentials folder (%d).
    for (const [spec] of unitLines(unit, 'LoadCredential')) {
      const [id, path] = [spec!.slice(0, spec!.indexOf(':')), spec!.slice(spec!.indexOf(':') + 1)];
      copyFileSync(path.startsWith('/etc/stash/') ? join(root.path, path) : path, join(credentials, id));
    }
    // What an operator of this test machine edits: a free port instead of 443, a state folder inside this root.
    const [port] = await freePorts(1);
    writeFileSync(
      p.config,
      readFileSync(p.config, 'utf8')
        .replace(/^bind_addr = .*$/m, `bind_addr = "127.0.0.1:${port}"`)
        .replace(/^state_dir = .*$/m, `state_dir = "${p.state}"`),
    );
    // The unit's words after node and the script, run by this node from the sources (tsx), with the unit's environment.
    const args = execStart(unit)
      .slice(2)
      .map((w) =>
        w === '/etc/stash/key-server.toml'
          ? p.config
          : w === '/var/log/stash-key-server/server.log'
            ? p.log
            : w.replace('%d', credentials),
      );
    const [node, ...prefix] = keyServerCommand;
    const child = spawn(node!, [...prefix, ...args], {
      env: { ...process.env, ...unitEnvironment(unit) },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => {
      out += d;
    });
    child.stderr.on('data', (d) => {
      err += d;
    });
    try {
      const deadline = Date.now() + 20_000;
      while (!/listening on https:\/\/127\.0\.0\.1:\d+/.test(out)) {
        if (Date.now() > deadline || child.exitCode !== null)
          throw new Error(
            `the unit's command did not start: ${err}${existsSync(p.log) ? readFileSync(p.log, 'utf8') : ''}`,
          );
        await new Promise((r) => setTimeout(r, 50));
      }
      const answer = await new Promise<{ status: number; hsts: unknown; names: string | undefined }>(
        (resolve, reject) => {
          const req = request(`https://127.0.0.1:${port}/v1/topology`, { ca: ca.pem, agent: false }, (res) => {
            res.resume();
            resolve({
              status: res.statusCode ?? 0,
              hsts: res.headers['strict-transport-security'],
              names: (res.socket as import('node:tls').TLSSocket).getPeerCertificate().subjectaltname,
            });
          });
          req.on('error', reject);
          req.end();
        },
      );
      assert.equal(answer, { status: 200, hsts: 'max-age=63072000', names: 'IP Address:127.0.0.1, DNS:localhost' });
    } finally {
      child.kill('SIGTERM');
      await new Promise((r) => (child.exitCode !== null ? r(null) : child.once('exit', r)));
    }
    assert.is(child.exitCode, 0, err);
    // The unit's --log-file: the log is in server.log, not on stderr.
    const log = readFileSync(p.log, 'utf8');
    assert.match(log, /info SIGTERM: shutting down\n/);
    assert.not.match(err + log, /PRIVATE KEY/);
  } finally {
    root.remove();
    pki.remove();
    rmSync(credentials, { recursive: true, force: true });
  }
});

test.run();
