// One cmake-js build of the addon for one release target, into
// build-release/<target>/. Used by scripts/release.js and, on its own, by the
// tests that run the Windows addon under Wine:
//   node scripts/release/build.js TARGET [COPY_TO.node] [--build-dir DIR]
// (TARGET: linux-x64, linux-arm64, win32-x64; DIR, emptied first: default build-release/<target>/)
import { spawnSync } from 'node:child_process';
import { copyFileSync, mkdirSync, readdirSync, rmSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { cpus } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { releaseTargets } from './targets.js';

function findNodeFile(dir) {
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) {
      if (name === 'CMakeFiles') continue;
      const found = findNodeFile(path);
      if (found) return found;
    } else if (name === 'stash_native.node') {
      return path;
    }
  }
  return null;
}

/**
 * Builds `target` with cmake-js (N-API headers from node-api-headers: nothing is
 * downloaded) in `out` (emptied first) and returns the path of the built .node
 * file. Throws with the build's output on failure.
 */
export function buildTarget(root, target, out = join(root, 'build-release', target.name)) {
  const cmakeJs = createRequire(join(root, 'package.json')).resolve('cmake-js/bin/cmake-js');
  rmSync(out, { recursive: true, force: true });
  const env = { ...process.env };
  delete env.npm_config_nodedir;
  const args = [cmakeJs, 'build', '--out', out, '--parallel', String(Math.max(1, cpus().length)), ...target.cmakeArgs];
  const r = spawnSync(process.execPath, args, { cwd: root, env, encoding: 'utf8', maxBuffer: 64 << 20 });
  if (r.status !== 0)
    throw new Error(
      `cmake-js build of ${target.name} failed (${r.status ?? r.error?.message}):\n${r.stdout}${r.stderr}`,
    );
  const file = findNodeFile(out);
  if (!file) throw new Error(`${target.name}: cmake-js finished but wrote no stash_native.node under ${out}`);
  return file;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const root = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
  const args = process.argv.slice(2);
  const at = args.indexOf('--build-dir');
  const buildDir = at >= 0 ? args.splice(at, 2)[1] : undefined;
  const [name, copyTo, extra] = args;
  const target = releaseTargets(root).find((t) => t.name === name);
  if (!target || extra !== undefined || (at >= 0 && !buildDir)) {
    console.error(
      `usage: node scripts/release/build.js TARGET [COPY_TO.node] [--build-dir DIR]   (TARGET: ${releaseTargets(root)
        .map((t) => t.name)
        .join(', ')})`,
    );
    process.exit(64);
  }
  try {
    const file = buildTarget(root, target, buildDir === undefined ? undefined : resolve(buildDir));
    if (copyTo) {
      mkdirSync(dirname(resolve(copyTo)), { recursive: true });
      copyFileSync(file, copyTo);
    }
    console.log(copyTo ?? file);
  } catch (err) {
    console.error(err.message);
    process.exit(1);
  }
}
