/**
 * A faster way into sodium-native for short CLI runs. sodium-native 5 finds
 * its prebuilt addon through require-addon, which loads bare-addon-resolve,
 * bare-module-resolve and bare-semver and walks package.json files: about
 * 10 ms of each `stash get` (docs/benchmarks.md). Where the prebuild for this
 * host is exactly where that resolution would end (Linux with glibc and
 * Windows, x64 or arm64), the addon is opened directly and put in the require
 * cache as sodium-native's binding.js, so `require('sodium-native')` skips the
 * resolver. Anything unexpected (another version, no such file, musl, macOS's
 * universal builds) leaves the ordinary path untouched.
 */
import { existsSync } from 'node:fs';
import Module, { createRequire } from 'node:module';
import { dirname, join } from 'node:path';

/** The sodium-native release whose binding.js is `module.exports = <the addon>` (checked by test/cli/help.test.ts). */
const VERIFIED_VERSION = '5.1.0';

/** Seeds the require cache with sodium-native's addon; true when it did. Never throws. */
export function preloadSodium(): boolean {
  if (process.platform === 'darwin' || (process.platform === 'linux' && existsSync('/etc/alpine-release')))
    return false;
  try {
    const require = createRequire(import.meta.url);
    const pkgPath = require.resolve('sodium-native/package.json');
    const dir = dirname(pkgPath);
    const binding = join(dir, 'binding.js');
    if (require.cache[binding]) return false;
    const { version } = require(pkgPath) as { version: string };
    if (version !== VERIFIED_VERSION) return false;
    const host = join(dir, 'prebuilds', `${process.platform}-${process.arch}`);
    // The order bare-addon-resolve tries: the versioned name, then the plain one.
    const addon = [`sodium-native@${version}.node`, 'sodium-native.node']
      .map((n) => join(host, n))
      .find((f) => existsSync(f));
    if (!addon) return false;
    const mod = new Module(binding);
    mod.filename = binding;
    mod.exports = require(addon);
    mod.loaded = true;
    require.cache[binding] = mod;
    return true;
  } catch {
    return false;
  }
}
