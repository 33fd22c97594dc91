/**
 * `install` run from the x64 single executable, into a temporary root
 * (STASH_KEY_SERVER_ROOT_PREFIX) with an otherwise empty environment: the
 * executable is copied to /usr/local/bin/stash_key_server and the unit runs
 * that copy (systemd-analyze verify), rated no worse than the unit the npm
 * package writes (systemd-analyze security --offline=yes); the copy, run
 * with exactly the unit's ExecStart= and Environment= lines (--processes
 * auto: a fetch process beside the store's; HTTPS with certificate files
 * handed over as systemd's credentials), serves a publish and fetches; the
 * unit's NODE_OPTIONS caps the executable's heap; uninstall removes the copy.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { spawnSync } from 'node:child_process';
import {
  copyFileSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { UNIT_NAME, installPaths, realPaths } from '../../src/keyserver/install/paths.js';
import { haveCommand, isRoot, needFacility } from '../helpers/facility.js';
import { mailSink } from '../keyserver/harness.js';
import { issueCert, makeCa } from '../keyserver/test-pki.js';
import { runServerCommand } from '../keyserver/cluster.js';
import { execStart, unitEnvironment, unitLines } from '../keyserver/unit-lines.js';
import { freePort, publishVerifyFetch, removeBuilt, singleExecutable, startSea } from './sea-harness.js';

test.after(() => removeBuilt());

/** install needs the certificate the service serves on 443: ACME names here (nothing is fetched at install). */
const ACME_FLAGS = ['--acme-domain', 'keys.example.org', '--acme-email', 'ops@example.org'];

/** A root with the folders every Linux system has. */
function fakeRoot(): { path: string; remove(): void } {
  const path = mkdtempSync(join(tmpdir(), 'stash-sea-root-'));
  for (const d of ['etc/systemd/system', 'var/lib', 'var/cache', 'var/log', 'usr/local/bin'])
    mkdirSync(join(path, d), { recursive: true });
  return { path, remove: () => rmSync(path, { recursive: true, force: true }) };
}

function tree(root: string): string[] {
  const out: string[] = [];
  const walk = (dir: string) => {
    for (const name of readdirSync(dir)) {
      out.push(relative(root, join(dir, name)));
      if (statSync(join(dir, name)).isDirectory()) walk(join(dir, name));
    }
  };
  walk(root);
  return out.sort();
}

/** Runs the executable with an empty environment but the root prefix. */
function inRoot(exe: string, root: string, args: string[]) {
  return spawnSync(exe, args, { env: { STASH_KEY_SERVER_ROOT_PREFIX: root }, encoding: 'utf8', timeout: 120_000 });
}

/** The overall exposure systemd-analyze gives a unit file. */
function exposure(unitFile: string): number {
  const r = spawnSync('systemd-analyze', ['security', '--offline=yes', unitFile], { encoding: 'utf8' });
  const m = /Overall exposure level for stash-key-server\.service: ([0-9.]+) (\w+)/.exec(r.stdout);
  assert.ok(m, r.stdout + r.stderr);
  return Number(m![1]);
}

test('install from the single executable copies it to /usr/local/bin and writes a unit that runs it, verified and rated no worse than the npm one; reinstall and uninstall', async () => {
  if (!needFacility(isRoot, 'root', 'install refuses to run without root')) return;
  const exe = singleExecutable('linux-x64');
  const root = fakeRoot();
  const npmRoot = fakeRoot();
  const check = mkdtempSync(join(tmpdir(), 'stash-sea-unit-'));
  try {
    const before = tree(root.path);
    const r = inRoot(exe, root.path, ['install', ...ACME_FLAGS]);
    assert.is(r.status, 0, r.stderr);
    const p = installPaths(root.path);
    assert.match(r.stdout, new RegExp(`^installed ${p.executable} \\(a copy of ${exe}, \\d+ bytes\\)$`, 'm'));
    assert.is(statSync(p.executable).mode & 0o7777, 0o755);
    assert.ok(readFileSync(p.executable).equals(readFileSync(exe)), 'the installed file is the executable');

    const unit = readFileSync(p.unit, 'utf8');
    assert.equal(execStart(unit), [
      realPaths.executable,
      'run',
      '--processes',
      'auto',
      '--config',
      realPaths.config,
      '--log-file',
      realPaths.log,
      '--replication-token-file',
      '%d/replication-token',
    ]);
    assert.is(unitEnvironment(unit).NODE_OPTIONS, '--max-semi-space-size=1 --max-old-space-size=64');
    assert.match(unit, /^ProtectHome=yes$/m);

    if (needFacility(haveCommand('systemd-analyze'), 'systemd-analyze', 'not installed (apt-get install systemd)')) {
      // verify needs ExecStart's file to exist: the same unit, naming the copy where this root holds it.
      const verifiable = join(check, UNIT_NAME);
      writeFileSync(verifiable, unit.replace(`ExecStart=${realPaths.executable} `, `ExecStart=${p.executable} `));
      const verify = spawnSync('systemd-analyze', ['verify', verifiable], { encoding: 'utf8' });
      assert.is(verify.status, 0, verify.stderr);
      assert.is(verify.stderr.trim(), '', 'no warnings');
      // Today's unit: the one `install` writes from the npm package (node and bin/stash_key_server.js).
      const npm = await runServerCommand(['install', ...ACME_FLAGS], {
        ...process.env,
        STASH_KEY_SERVER_ROOT_PREFIX: npmRoot.path,
      });
      assert.is(npm.code, 0, npm.stderr);
      const seaScore = exposure(p.unit);
      const npmScore = exposure(installPaths(npmRoot.path).unit);
      assert.ok(seaScore <= npmScore, `exposure ${seaScore} (single executable) vs ${npmScore} (npm)`);
      assert.ok(seaScore < 2, `exposure ${seaScore}`);
    }

    // Run again from the installed copy (the kept config names the certificate): the copy stays as it is.
    const again = inRoot(p.executable, root.path, ['install']);
    assert.is(again.status, 0, again.stderr);
    assert.match(again.stdout, /^kept .*\/usr\/local\/bin\/stash_key_server \(the executable running this install\)$/m);

    // npm's command of the same name is a link: never replaced, and the message says what to do.
    rmSync(p.executable);
    symlinkSync('../lib/node_modules/stash-vault/bin/stash_key_server.js', p.executable);
    const conflict = inRoot(exe, root.path, ['install']);
    assert.is(conflict.status, 73, conflict.stderr);
    assert.match(
      conflict.stderr,
      /^stash_key_server: .*\/usr\/local\/bin\/stash_key_server is a link to \.\.\/lib\/node_modules\/stash-vault\/bin\/stash_key_server\.js \(npm's command, if that is bin\/stash_key_server\.js\); install the single executable after removing it/,
    );
    rmSync(p.executable);
    assert.is(inRoot(exe, root.path, ['install']).status, 0);

    const purge = inRoot(exe, root.path, ['uninstall', '--purge-data']);
    assert.is(purge.status, 0, purge.stderr);
    assert.match(purge.stdout, /^removed .*\/usr\/local\/bin\/stash_key_server$/m);
    assert.equal(tree(root.path), before, 'everything install created is gone');
  } finally {
    root.remove();
    npmRoot.remove();
    rmSync(check, { recursive: true, force: true });
  }
});

test("the installed copy, run with exactly the unit's ExecStart= and Environment= lines, serves from two processes a publish and fetches; NODE_OPTIONS caps its heap", async () => {
  if (
    !needFacility(
      isRoot && haveCommand('openssl'),
      'root and openssl',
      'install refuses to run without root; openssl makes the test CA',
    )
  )
    return;
  const exe = singleExecutable('linux-x64');
  const root = fakeRoot();
  const sink = mailSink();
  const credentials = mkdtempSync(join(tmpdir(), 'stash-sea-cred-'));
  try {
    const ca = makeCa(credentials);
    const cert = issueCert(ca);
    const installed = inRoot(exe, root.path, ['install', '--tls-cert', cert.certPath, '--tls-key', cert.keyPath]);
    assert.is(installed.status, 0, installed.stderr);
    const p = installPaths(root.path);
    const unit = readFileSync(p.unit, 'utf8');
    // What systemd does at start: each LoadCredential= file copied into the credentials folder (%d).
    for (const [spec] of unitLines(unit, 'LoadCredential')) {
      const at = spec!.indexOf(':');
      const path = spec!.slice(at + 1);
      copyFileSync(path.startsWith('/etc/') ? join(root.path, path) : path, join(credentials, spec!.slice(0, at)));
    }
    // What an operator edits: the port (a free one here), the state folder (inside this root) and the mail command.
    const port = await freePort();
    const config = readFileSync(p.config, 'utf8')
      .replace(/^bind_addr = .*$/m, `bind_addr = "127.0.0.1:${port}"`)
      .replace(/^state_dir = .*$/m, `state_dir = "${p.state}"`)
      .replace(/^# verification_email_command = .*$/m, `verification_email_command = "${sink.command}"`);
    writeFileSync(p.config, config);

    // The unit's words with its absolute paths inside this root, and %d where systemd puts the credentials.
    const inside = (w: string) => (w.startsWith('/') ? join(root.path, w) : w.replace('%d', credentials));
    const [command, ...unitArgs] = execStart(unit).map(inside);
    // --processes auto is one process (run.ts AUTO_PROCESSES); this suite runs two to see the executable start its fetch process.
    const args = unitArgs.map((a) => (a === 'auto' ? '2' : a));
    assert.is(command, p.executable);
    // Exactly the unit's Environment= lines, plus what systemd sets for CacheDirectory= and LoadCredential=. No PATH, no HOME.
    const env: Record<string, string> = {
      ...unitEnvironment(unit),
      CACHE_DIRECTORY: p.cache,
      CREDENTIALS_DIRECTORY: credentials,
    };
    const server = await startSea([command!], args, env, 60_000, ca.pem);
    assert.match(server.url, /^https:/);
    // The unit's --log-file (inside this root): the log is there, not on stderr.
    const log = () => `${server.stderr()}${readFileSync(p.log, 'utf8')}`;
    try {
      assert.match(log(), /fetch process 1 started \(pid \d+\)/);
      const children = readFileSync(`/proc/${server.child.pid}/task/${server.child.pid}/children`, 'utf8')
        .trim()
        .split(/\s+/)
        .filter(Boolean);
      assert.is(children.length, 1, 'one fetch process');
      // The fetch process is the same executable, started with __fetch-process alone, with the unit's NODE_OPTIONS.
      assert.equal(readFileSync(`/proc/${children[0]}/cmdline`, 'utf8').split('\0').filter(Boolean), [
        p.executable,
        '__fetch-process',
      ]);
      assert.ok(
        readFileSync(`/proc/${children[0]}/environ`, 'utf8').split('\0').includes(`NODE_OPTIONS=${env.NODE_OPTIONS}`),
      );

      // Four fetches on connections of their own: handed to the two processes in turn (multi/store-side.ts).
      const flow = await publishVerifyFetch(
        server.url,
        'carol@example.org',
        () => sink.mails().find((m) => m.email === 'carol@example.org')?.url,
        4,
        ca.pem,
      );
      assert.is(flow.verification, 'sent');
      assert.ok(flow.refusedBeforeConfirm);
      assert.equal(
        flow.fetched,
        Array.from({ length: 4 }, () => ({ sameKey: true, email: 'carol@example.org' })),
      );
      assert.not.match(log(), /ERROR|Warning/);
    } finally {
      assert.is(await server.stop(), 0, log());
    }
    assert.ok(
      statSync(join(p.cache, readdirSync(p.cache)[0]!, 'sodium-native.node')).isFile(),
      'the addon was cached in CACHE_DIRECTORY',
    );

    // NODE_OPTIONS reaches node in a single executable: a probe required through it reads the heap limit,
    // which is the old generation plus three semi-spaces (64 + 3 x 1 MiB here, 64 + 3 x 16 MiB without the semi-space flag).
    const probe = join(credentials, 'probe.cjs');
    writeFileSync(
      probe,
      'process.stdout.write(String(require("v8").getHeapStatistics().heap_size_limit)); process.exit(0);\n',
    );
    const limit = (nodeOptions: string) => {
      const r = spawnSync(p.executable, ['--version'], {
        env: { ...env, NODE_OPTIONS: `${nodeOptions} --require ${probe}` },
        encoding: 'utf8',
      });
      assert.is(r.status, 0, r.stderr);
      return Number(r.stdout);
    };
    assert.is(limit(env.NODE_OPTIONS!), 67 * 1024 * 1024);
    assert.is(limit('--max-old-space-size=64'), 112 * 1024 * 1024);
  } finally {
    root.remove();
    sink.remove();
    rmSync(credentials, { recursive: true, force: true });
  }
});

test.run();
