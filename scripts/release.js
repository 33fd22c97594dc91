#!/usr/bin/env node
// `npm run release`: builds the addon for every release target with cmake-js into
// prebuilds/<platform>-<arch>/node.napi.node (the layout and names node-gyp-build
// reads, as prebuildify writes them), runs each prebuild on its own platform
// (linux-x64 for real, linux-arm64 under qemu-user, win32-x64 under Wine), writes
// the key server's single executables for the Linux targets beside the tarball
// (stash_key_server-VERSION-linux-x64 and -linux-arm64, scripts/release/sea.js;
// that script alone builds just those), then packs one tarball and prints its
// path on the last line.
//   node scripts/release.js [--out DIR] [--only linux-x64,win32-x64]
// Needs cmake, g++, g++-aarch64-linux-gnu, qemu-user, g++-mingw-w64-x86-64 and wine
// (Debian package names); the arm64 and Windows Node builds come from the npm
// registry (scripts/fetch-node.js), of the same version as the running Node.
import { spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, readdirSync, rmSync, statSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { fetchNode } from './fetch-node.js';
import { buildTarget } from './release/build.js';
import { SEA_TARGETS, buildSingleExecutables } from './release/sea.js';
import { aptPackageOf, notBuiltHere, releaseTargets } from './release/targets.js';
import { verifyPrebuild } from './release/verify.js';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');

class ReleaseError extends Error {}

function parseArgs(argv) {
  const opts = { out: root, only: null };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === '--out' || arg === '--only') {
      const value = argv[++i];
      if (!value) throw new ReleaseError(`${arg} needs a value`);
      if (arg === '--out') opts.out = resolve(value);
      else opts.only = value.split(',');
    } else if (arg === '--help' || arg === '-h') {
      console.log('usage: npm run release [-- --out DIR] [-- --only linux-x64,linux-arm64,win32-x64]');
      process.exit(0);
    } else {
      throw new ReleaseError(`unknown option ${arg} (see --help)`);
    }
  }
  return opts;
}

const have = (cmd) => spawnSync('sh', ['-c', `command -v ${cmd}`], { stdio: 'ignore' }).status === 0;

function run(cmd, args, opts = {}) {
  const r = spawnSync(cmd, args, { cwd: root, encoding: 'utf8', maxBuffer: 64 << 20, ...opts });
  if (r.error) throw new ReleaseError(`${cmd}: ${r.error.message}`);
  if (r.status !== 0)
    throw new ReleaseError(`${cmd} ${args.join(' ')} failed (${r.status}):\n${r.stdout ?? ''}${r.stderr ?? ''}`);
  return r.stdout ?? '';
}

function nodeOf(target) {
  if (!target.nodePackage) return process.execPath;
  const dir = fetchNode(target.nodePackage, process.versions.node);
  return join(dir, 'bin', target.runner === 'wine' ? 'node.exe' : 'node');
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  const all = releaseTargets(root);
  const targets = opts.only ? all.filter((t) => opts.only.includes(t.name)) : all;
  for (const name of opts.only ?? [])
    if (!all.some((t) => t.name === name))
      throw new ReleaseError(`no release target ${name} (${all.map((t) => t.name).join(', ')})`);

  const missing = [...new Set(targets.flatMap((t) => t.tools))].filter((t) => !have(t));
  if (missing.length > 0) {
    throw new ReleaseError(
      `missing tools: ${missing.join(', ')} (apt-get install ${[...new Set(missing.map((t) => aptPackageOf[t] ?? t))].join(' ')})`,
    );
  }

  console.log('release: compiling TypeScript (dist/)');
  run('npm', ['run', '--silent', 'compile']);
  for (const target of targets) rmSync(join(root, 'prebuilds', target.name), { recursive: true, force: true });

  for (const target of targets) {
    const node = nodeOf(target);
    const built = buildTarget(root, target);
    const dest = join(root, 'prebuilds', target.name, 'node.napi.node');
    mkdirSync(dirname(dest), { recursive: true });
    copyFileSync(built, dest);
    console.log(`release: built ${target.name} with cmake-js (${statSync(dest).size} bytes)`);
    const report = await verifyPrebuild(root, target, dest, node);
    const identity = report.peer ? 'peerCredentials named this process' : 'processInfo answered';
    console.log(
      `release: checked ${target.name}: ${target.how} on node ${report.node}: addon loaded from ${report.addon}, ${identity}, agent put/get round trip ok`,
    );
  }
  const seaTargets = SEA_TARGETS.filter((t) => targets.some((x) => x.name === t.name)).map((t) => t.name);
  const executables =
    seaTargets.length > 0
      ? await buildSingleExecutables(root, {
          outDir: opts.out,
          targets: seaTargets,
          log: (line) => console.log(`release: ${line}`),
        })
      : [];
  for (const skip of notBuiltHere) console.log(`release: not built here: ${skip.name}: ${skip.why}`);
  // Prebuilds made elsewhere (a maintainer's Mac) are packed as they are, and said so.
  const others = existsSync(join(root, 'prebuilds'))
    ? readdirSync(join(root, 'prebuilds')).filter((d) => !targets.some((t) => t.name === d))
    : [];
  for (const name of others)
    console.log(`release: packing prebuilds/${name} as found: made elsewhere, not built or checked by this release`);

  mkdirSync(opts.out, { recursive: true });
  // The tarball carries the lock file as npm-shrinkwrap.json, so a user's install gets
  // exactly the dependency tree CI tested (npm's advice for command-line tools).
  const shrinkwrap = join(root, 'npm-shrinkwrap.json');
  copyFileSync(join(root, 'package-lock.json'), shrinkwrap);
  let packed;
  try {
    packed = JSON.parse(run('npm', ['pack', '--json', '--pack-destination', opts.out]));
  } finally {
    rmSync(shrinkwrap, { force: true });
  }
  const files = packed[0].files.map((f) => f.path);
  if (!files.includes('npm-shrinkwrap.json')) throw new ReleaseError('the tarball lacks npm-shrinkwrap.json');
  for (const target of targets) {
    if (!files.includes(`prebuilds/${target.name}/node.napi.node`))
      throw new ReleaseError(`the tarball lacks prebuilds/${target.name}/node.napi.node`);
  }
  const tarball = join(opts.out, packed[0].filename);
  if (!existsSync(tarball)) throw new ReleaseError(`npm pack reported ${tarball}, which does not exist`);
  for (const e of executables) console.log(`release: single executable ${e.path} (${e.bytes} bytes)`);
  console.log(`release: packed ${files.length} files, prebuilds for ${targets.map((t) => t.name).join(', ')}`);
  console.log(tarball);
}

main().catch((err) => {
  console.error(`release: ${err instanceof ReleaseError ? err.message : err.stack}`);
  process.exit(1);
});
