/**
 * install / uninstall / status into a temporary root
 * (STASH_KEY_SERVER_ROOT_PREFIX), through the real entry point: the files
 * and folders, the unit checked by `systemd-analyze verify` and rated by
 * `systemd-analyze security --offline=yes`, the config kept unless
 * --force-config and valid for the server's own parser, uninstall
 * --purge-data leaving the root as it found it; refusals for a non-root
 * user (a second uid through setpriv) and on other platforms.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, readFileSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { defaultConfig } from '../../src/keyserver/cli/options.js';
import { parseCommandLine } from '../../src/keyserver/cli/parse.js';
import { install, serviceStatus, uninstall, type HostFacts } from '../../src/keyserver/install/install.js';
import { installPaths } from '../../src/keyserver/install/paths.js';
import { haveCommand, isRoot, needFacility } from '../helpers/facility.js';
import { asNobody, readableCopy } from '../helpers/readable-copy.js';
import { tempDir } from './harness.js';
import { unitEnvironment } from './unit-lines.js';
import { runServerCommand } from './cluster.js';

/** Every path under `root`, relative, sorted. */
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

/** A root with the folders every Linux system has. */
function fakeRoot(): { path: string; remove(): void } {
  const root = tempDir('root');
  for (const d of ['etc/systemd/system', 'var/lib', 'var/cache', 'var/log'])
    mkdirSync(join(root.path, d), { recursive: true });
  return root;
}

const env = (root: string) => ({ ...process.env, STASH_KEY_SERVER_ROOT_PREFIX: root });
/** install needs the certificate's source (install-https.test.ts has the rest): ACME here. */
const ACME_FLAGS = ['--acme-domain', 'keys.example.org', '--acme-email', 'ops@example.org'];
const withAcme = (extra: Partial<ReturnType<typeof defaultConfig>> = {}) => ({
  ...defaultConfig(),
  acmeDomains: ['keys.example.org'],
  ...extra,
});
/** systemd-analyze security's exposure of the unit before it served HTTPS on 443 (issue 28): it must not grow. */
const EXPOSURE_BEFORE_443 = 1.5;

test('install writes a hardened unit that systemd-analyze verifies and rates OK, a valid config and the folders; uninstall --purge-data removes them', async () => {
  if (!needFacility(isRoot, 'root', 'install refuses to run without root')) return;
  const root = fakeRoot();
  try {
    const before = tree(root.path);
    const r = await runServerCommand(['install', ...ACME_FLAGS], env(root.path));
    assert.is(r.code, 0, r.stderr);
    assert.match(r.stdout, /systemctl not run/);
    const p = installPaths(root.path);
    const unit = readFileSync(p.unit, 'utf8');
    assert.is(statSync(p.unit).mode & 0o777, 0o644);
    for (const line of [
      'DynamicUser=yes',
      'ProtectSystem=strict',
      'NoNewPrivileges=yes',
      'StateDirectory=stash-key-server',
      'CacheDirectory=stash-key-server',
      'LogsDirectory=stash-key-server',
      'CapabilityBoundingSet=CAP_NET_BIND_SERVICE',
      'AmbientCapabilities=CAP_NET_BIND_SERVICE',
      'WantedBy=multi-user.target',
    ]) {
      assert.ok(unit.split('\n').includes(line), `unit has ${line}`);
    }
    // The server writes server.log itself (--log-file, rotated within the disk cap): systemd appends nothing to it.
    assert.not.match(unit, /^Standard(Output|Error)=append:/m);
    const exec =
      /^ExecStart=(\S+node\S*) \S+\/bin\/stash_key_server\.js run --processes auto --config \/etc\/stash\/key-server\.toml --log-file \/var\/log\/stash-key-server\/server\.log --replication-token-file %d\/replication-token$/m.exec(
        unit,
      );
    assert.ok(exec, `ExecStart line as expected in:\n${unit}`);
    // The memory settings (docs/operations.md, "Memory"): node takes the flags from NODE_OPTIONS and they cap the heap; the allocator settings reach the process.
    const unitEnv = unitEnvironment(unit);
    assert.is(unitEnv.NODE_OPTIONS, '--max-semi-space-size=1 --max-old-space-size=64');
    const probe = spawnSync(
      exec[1]!,
      [
        '-e',
        'console.log(JSON.stringify({ limit: require("v8").getHeapStatistics().heap_size_limit, env: [process.env.MALLOC_ARENA_MAX, process.env.MALLOC_MMAP_THRESHOLD_, process.env.MALLOC_TRIM_THRESHOLD_] }))',
      ],
      { encoding: 'utf8', env: { ...process.env, ...unitEnv } },
    );
    assert.is(probe.status, 0, probe.stderr);
    const seen = JSON.parse(probe.stdout) as { limit: number; env: string[] };
    assert.ok(seen.limit < 100 * 1024 * 1024, `heap limit ${seen.limit}`);
    assert.equal(seen.env, ['2', '65536', '65536']);
    assert.match(unit, /^LoadCredential=replication-token:\/etc\/stash\/replication-token$/m);
    // The token: random, root-only, and what the server reads with --replication-token-file; never in the config.
    assert.is(statSync(p.token).mode & 0o777, 0o600);
    const token = readFileSync(p.token, 'utf8');
    assert.match(token, /^[0-9a-f]{64}\n$/);
    assert.not.ok(readFileSync(p.config, 'utf8').includes(token.trim()));
    const withToken = parseCommandLine(['run', '--config', p.config, '--replication-token-file', p.token]);
    assert.ok(withToken.command === 'run' && withToken.config.replicationToken === token.trim());
    assert.throws(
      () => parseCommandLine(['run', '--replication-token', 'x'.repeat(20), '--replication-token-file', p.token]),
      /--replication-token or --replication-token-file, not both/,
    );
    for (const dir of [p.state, p.cache, p.logDir]) assert.ok(statSync(dir).isDirectory(), dir);
    assert.is(statSync(p.state).mode & 0o777, 0o700);

    // The written config is what the server itself accepts.
    const inv = parseCommandLine(['run', '--config', p.config]);
    assert.ok(inv.command === 'run' && inv.config.stateDir === '/var/lib/stash-key-server');

    if (needFacility(haveCommand('systemd-analyze'), 'systemd-analyze', 'not installed')) {
      const verify = spawnSync('systemd-analyze', ['verify', p.unit], { encoding: 'utf8' });
      assert.is(verify.status, 0, verify.stderr);
      assert.is(verify.stderr.trim(), '', 'no warnings');
      const security = spawnSync('systemd-analyze', ['security', '--offline=yes', p.unit], { encoding: 'utf8' });
      const m = /Overall exposure level for stash-key-server\.service: ([0-9.]+) (\w+)/.exec(security.stdout);
      assert.ok(m, security.stdout + security.stderr);
      assert.ok(['OK', 'SAFE'].includes(m![2]!), `rating ${m![1]} ${m![2]}`);
      assert.ok(Number(m![1]) <= EXPOSURE_BEFORE_443, `exposure ${m![1]} (was ${EXPOSURE_BEFORE_443})`);
    }

    const status = await runServerCommand(['status'], env(root.path));
    assert.is(status.code, 0, status.stderr);
    assert.match(status.stdout, /^unit: .*stash-key-server\.service installed, systemd not running/m);
    assert.match(status.stdout, /^config: .*key-server\.toml ok \(bind 0\.0\.0\.0:443, server 0, cluster default/m);
    assert.match(status.stdout, /^token: .*replication-token present, mode 0600$/m);
    assert.match(status.stdout, /^state: .*stash-key-server, store\.log missing, not in use$/m);
    assert.match(status.stdout, /^log: .*server\.log no log yet$/m);

    const keep = await runServerCommand(['uninstall'], env(root.path));
    assert.is(keep.code, 0, keep.stderr);
    assert.ok(
      !existsSync(p.unit) && existsSync(p.config) && existsSync(p.token) && existsSync(p.state),
      'plain uninstall keeps config, token and data',
    );
    const purge = await runServerCommand(['uninstall', '--purge-data'], env(root.path));
    assert.is(purge.code, 0, purge.stderr);
    assert.equal(tree(root.path), before, 'everything install created is gone');
    const gone = await runServerCommand(['status'], env(root.path));
    assert.is(gone.code, 3);
    assert.match(gone.stdout, /not installed/);
  } finally {
    root.remove();
  }
});

test('a second install keeps an edited config; --force-config rewrites it', async () => {
  if (!needFacility(isRoot, 'root', 'install refuses to run without root')) return;
  const root = fakeRoot();
  try {
    const p = installPaths(root.path);
    const lines: string[] = [];
    const host: HostFacts = {
      platform: 'linux',
      uid: 0,
      systemdRunning: false,
      systemctl: () => ({ status: 1, output: 'must not run' }),
    };
    await install(withAcme(), (l) => lines.push(l), host, p);
    // An edited config that names the certificate: install needs no flag.
    writeFileSync(p.config, 'server_id = 3\nacme_domain = "keys.example.org"\n');
    await install(defaultConfig(), (l) => lines.push(l), host, p);
    assert.is(readFileSync(p.config, 'utf8'), 'server_id = 3\nacme_domain = "keys.example.org"\n');
    assert.ok(lines.some((l) => /kept .*--force-config rewrites it/.test(l)));
    await install(withAcme({ forceConfig: true }), (l) => lines.push(l), host, p);
    assert.match(readFileSync(p.config, 'utf8'), /^state_dir = "\/var\/lib\/stash-key-server"$/m);
    // On a real root without systemd (this container) the files are written and the output says what was not done.
    lines.length = 0;
    await install(defaultConfig(), (l) => lines.push(l), host, { ...p, prefix: '' });
    assert.match(
      lines.at(-1)!,
      /^systemd is not running on this system \(no \/run\/systemd\/system\): the files are written, but the service was NOT enabled or started; once systemd runs: systemctl daemon-reload && systemctl enable --now stash-key-server\.service$/,
    );
  } finally {
    root.remove();
  }
});

test('with systemd running, install enables and starts the service through systemctl; uninstall disables it', async () => {
  const root = fakeRoot();
  try {
    const calls: string[] = [];
    const host: HostFacts = {
      platform: 'linux',
      uid: 0,
      systemdRunning: true,
      systemctl: (a) => {
        calls.push(a.join(' '));
        return { status: 0, output: 'enabled' };
      },
    };
    const p = installPaths(root.path);
    await install(withAcme(), () => {}, host, p);
    assert.equal(calls, ['daemon-reload', 'enable --now stash-key-server.service']);
    calls.length = 0;
    const lines: string[] = [];
    assert.is(await serviceStatus((l) => lines.push(l), host, p), 0);
    assert.match(lines[0]!, /installed, enabled, enabled/);
    calls.length = 0;
    await uninstall(defaultConfig(), () => {}, host, p);
    assert.equal(calls, ['disable --now stash-key-server.service', 'daemon-reload']);
    // A failing systemctl is an error that says which step failed.
    const failing: HostFacts = { ...host, systemctl: () => ({ status: 1, output: 'Failed to connect to bus' }) };
    try {
      await install(defaultConfig(), () => {}, failing, p);
      assert.unreachable('should fail');
    } catch (err) {
      assert.match((err as Error).message, /systemctl daemon-reload failed \(exit 1\): Failed to connect to bus/);
    }
  } finally {
    root.remove();
  }
});

test('refusals: not root (a real second uid), not Linux', async () => {
  const root = fakeRoot();
  try {
    chmodSync(root.path, 0o755);
    const host = (platform: NodeJS.Platform, uid: number): HostFacts => ({
      platform,
      uid,
      systemdRunning: false,
      systemctl: () => ({ status: 0, output: '' }),
    });
    for (const run of [install, uninstall]) {
      try {
        await run(defaultConfig(), () => {}, host('darwin', 0), installPaths(root.path));
        assert.unreachable('darwin');
      } catch (err) {
        assert.is((err as { code?: string }).code, 'UNSUPPORTED_PLATFORM');
        assert.match((err as Error).message, /runs on Linux only \(this is darwin\)/);
      }
    }
    if (needFacility(isRoot && haveCommand('setpriv'), 'second uid', 'needs root and setpriv to run as nobody')) {
      // From a readable copy of the compiled package: nobody may not be able to enter the checkout.
      const copy = readableCopy();
      const [setpriv, ...asUser] = asNobody;
      const nobody = spawnSync(
        setpriv,
        [
          ...asUser,
          'env',
          `STASH_KEY_SERVER_ROOT_PREFIX=${root.path}`,
          copy.node,
          join(copy.root, 'bin', 'stash_key_server.js'),
          'install',
        ],
        { encoding: 'utf8', timeout: 30_000 },
      );
      copy.remove();
      assert.is(nobody.status, 77, nobody.stderr);
      assert.match(nobody.stderr, /`install` must run as root/);
      assert.ok(!existsSync(installPaths(root.path).unit), 'nothing written');
    }
  } finally {
    root.remove();
  }
});

test.run();
