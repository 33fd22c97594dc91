/**
 * The two builds of the one addon compile the same files: binding.gyp (node-gyp,
 * the install-time fallback) and CMakeLists.txt (cmake-js, the release) both take
 * their sources from native/sources.json. Each build is configured for real and
 * asked what it would compile: gyp's generated makefile (OBJS) for Linux, Windows
 * and macOS, and CMake's file API (codemodel-v2) for the three release targets.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { spawnSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join, relative, resolve } from 'node:path';
import { haveCommand, needFacility } from '../helpers/facility.js';

type Group = 'common' | 'linux' | 'mac' | 'win';
const sources = JSON.parse(readFileSync('native/sources.json', 'utf8')) as Record<Group, string[]>;
const expected = (os: Exclude<Group, 'common'>): string[] => [...sources.common, ...sources[os]].sort();
const require = createRequire(join(process.cwd(), 'package.json'));

test('native/sources.json lists every native source once, each OS folder only for its OS', () => {
  const folder = { linux: 'linux', mac: 'macos', win: 'windows' } as const;
  for (const [os, dir] of Object.entries(folder) as Array<[keyof typeof folder, string]>) {
    const list = expected(os);
    assert.is(new Set(list).size, list.length, `a source is listed twice for ${os}`);
    for (const f of readdirSync(`native/${dir}`).filter((n) => n.endsWith('.cc'))) {
      assert.ok(list.includes(`native/${dir}/${f}`), `native/${dir}/${f} is not built on ${os}`);
    }
    for (const f of list) {
      assert.ok(!/native\/(linux|macos|windows)\//.test(f) || f.startsWith(`native/${dir}/`), `${f} is built on ${os}`);
      assert.ok(readFileSync(f).length > 0, `${f} exists`);
    }
  }
  for (const f of ['pipe_windows.cc', 'pipe_core_windows.cc', 'console_windows.cc'])
    assert.ok(sources.win.includes(`native/windows/${f}`), f);
});

test('neither build file names a source of its own', () => {
  for (const file of ['binding.gyp', 'CMakeLists.txt']) {
    const text = readFileSync(file, 'utf8').replace(/^\s*#.*$/gm, '');
    assert.not.match(text, /native\/[\w/]+\.cc/, `${file} must take its sources from native/sources.json`);
  }
});

/** A copy of what the two builds read, so configuring never touches the checkout's build/. */
function sandbox(): string {
  const dir = mkdtempSync(join(tmpdir(), 'stash-sources-'));
  for (const f of ['binding.gyp', 'CMakeLists.txt', 'package.json']) cpSync(f, join(dir, f));
  cpSync('native', join(dir, 'native'), { recursive: true });
  cpSync('cmake', join(dir, 'cmake'), { recursive: true });
  symlinkSync(resolve('node_modules'), join(dir, 'node_modules'));
  return dir;
}

/** What gyp's make generator would compile for `os` (node-gyp's own delay-load hook left out). */
function gypSources(dir: string, os: 'linux' | 'win' | 'mac'): string[] {
  rmSync(join(dir, 'build'), { recursive: true, force: true });
  const nodeGyp = require.resolve('node-gyp/bin/node-gyp.js');
  // The running Node's headers, as scripts/install-addon.js finds them; configuring reads only common.gypi.
  const env = { ...process.env, npm_config_nodedir: resolve(process.execPath, '..', '..') };
  const r = spawnSync(process.execPath, [nodeGyp, 'configure', '--', `-DOS=${os}`], {
    cwd: dir,
    env,
    encoding: 'utf8',
  });
  assert.is(r.status, 0, `node-gyp configure (OS=${os}):\n${r.stdout}${r.stderr}`);
  const mk = readFileSync(join(dir, 'build', 'stash_native.target.mk'), 'utf8');
  const objs = /^OBJS := \\\n((?:\t.*\\?\n)+)/m.exec(mk)?.[1] ?? '';
  return objs
    .split('\n')
    .map((l) => /\$\(TARGET\)\/((?:native|build)\/\S+)\.o/.exec(l)?.[1])
    .filter((f): f is string => f !== undefined)
    .flatMap((f) => (f.startsWith('build/') ? unityIncludes(dir, `${f}.cc`) : [`${f}.cc`]))
    .sort();
}

/** The sources a generated one-translation-unit file (native/sources.cjs --unity) #includes, from the checkout's root. */
function unityIncludes(dir: string, file: string): string[] {
  const text = readFileSync(join(dir, file), 'utf8');
  const lines = text.split('\n').filter((l) => l.startsWith('#include'));
  assert.ok(lines.length > 0, `${file} includes nothing`);
  return lines.map((l) => {
    const path = /^#include "([^"]+)"$/.exec(l)?.[1];
    assert.ok(path, `${file}: not a quoted include: ${l}`);
    return relative(dir, resolve(dir, 'build', path!));
  });
}

/** What CMake would compile, read from its file API after a cmake-js configure. */
function cmakeSources(dir: string, args: string[]): { sources: string[]; unity: boolean } {
  const out = join(dir, 'build-cmake');
  rmSync(out, { recursive: true, force: true });
  mkdirSync(join(out, '.cmake', 'api', 'v1', 'query'), { recursive: true });
  writeFileSync(join(out, '.cmake', 'api', 'v1', 'query', 'codemodel-v2'), '');
  const cmakeJs = require.resolve('cmake-js/bin/cmake-js');
  const r = spawnSync(process.execPath, [cmakeJs, 'configure', '--out', out, ...args], { cwd: dir, encoding: 'utf8' });
  assert.is(r.status, 0, `cmake-js configure ${args.join(' ')}:\n${r.stdout}${r.stderr}`);
  const reply = join(out, '.cmake', 'api', 'v1', 'reply');
  const index = JSON.parse(
    readFileSync(join(reply, readdirSync(reply).find((f) => f.startsWith('index-'))!), 'utf8'),
  ) as {
    objects: Array<{ kind: string; jsonFile: string }>;
  };
  const model = JSON.parse(
    readFileSync(join(reply, index.objects.find((o) => o.kind === 'codemodel')!.jsonFile), 'utf8'),
  ) as {
    configurations: Array<{ targets: Array<{ name: string; jsonFile: string }> }>;
  };
  const entry = model.configurations[0]!.targets.find((t) => t.name === 'stash_native')!;
  const target = JSON.parse(readFileSync(join(reply, entry.jsonFile), 'utf8')) as { sources: Array<{ path: string }> };
  // CMake's one-translation-unit file (UNITY_BUILD: Linux, mingw-w64) is generated in its build folder;
  // the sources it includes are listed beside it.
  const paths = target.sources.map((s) => s.path.replace(`${dir}/`, ''));
  const isUnity = (p: string) => /\/Unity\/unity_[0-9]+_cxx\.cxx$/.test(p);
  return { sources: paths.filter((p) => !isUnity(p)).sort(), unity: paths.some(isUnity) };
}

test('node-gyp (binding.gyp) would compile exactly native/sources.json on Linux, Windows and macOS', () => {
  const dir = sandbox();
  try {
    for (const os of ['linux', 'win', 'mac'] as const) assert.equal(gypSources(dir, os), expected(os), `OS=${os}`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('on Linux both builds compile one translation unit that includes every Linux source in the listed order', () => {
  const dir = sandbox();
  try {
    rmSync(join(dir, 'build'), { recursive: true, force: true });
    const r = spawnSync(process.execPath, ['native/sources.cjs', '--unity', 'common', 'linux'], {
      cwd: dir,
      encoding: 'utf8',
    });
    assert.is(r.status, 0, r.stderr);
    assert.is(r.stdout.trim(), 'build/unity-linux.cc');
    assert.equal(unityIncludes(dir, 'build/unity-linux.cc'), [...sources.common, ...sources.linux]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('cmake-js (CMakeLists.txt) would compile exactly native/sources.json for each release target', () => {
  if (!needFacility(haveCommand('cmake'), 'cmake', 'apt-get install cmake')) return;
  const dir = sandbox();
  try {
    assert.equal(cmakeSources(dir, []), { sources: expected('linux'), unity: true }, 'linux-x64');
    if (
      needFacility(
        haveCommand('aarch64-linux-gnu-g++'),
        'aarch64 cross compiler',
        'apt-get install g++-aarch64-linux-gnu',
      )
    ) {
      assert.equal(
        cmakeSources(dir, [
          '--arch',
          'arm64',
          `--CDCMAKE_TOOLCHAIN_FILE=${join(dir, 'cmake', 'aarch64-linux-gnu.cmake')}`,
        ]),
        { sources: expected('linux'), unity: true },
        'linux-arm64',
      );
    }
    if (
      needFacility(haveCommand('x86_64-w64-mingw32-g++-posix'), 'mingw-w64', 'apt-get install g++-mingw-w64-x86-64')
    ) {
      assert.equal(
        cmakeSources(dir, [`--CDCMAKE_TOOLCHAIN_FILE=${join(dir, 'cmake', 'x86_64-w64-mingw32.cmake')}`]),
        { sources: expected('win'), unity: true },
        'win32-x64 (mingw-w64)',
      );
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a source the two lists disagree on is caught (the comparison bites)', () => {
  const dir = sandbox();
  try {
    // A CMakeLists that adds one more file than sources.json says: the CMake side must differ.
    const cmake = readFileSync(join(dir, 'CMakeLists.txt'), 'utf8');
    writeFileSync(
      join(dir, 'CMakeLists.txt'),
      cmake.replace(
        'list(APPEND STASH_SOURCES ${STASH_OS_SOURCES})',
        'list(APPEND STASH_SOURCES ${STASH_OS_SOURCES} "${CMAKE_CURRENT_SOURCE_DIR}/native/macos/peer_macos.cc")',
      ),
    );
    if (haveCommand('cmake')) assert.not.equal(cmakeSources(dir, []).sources, expected('linux'));
    const gyp = readFileSync(join(dir, 'binding.gyp'), 'utf8');
    writeFileSync(
      join(dir, 'binding.gyp'),
      gyp.replace(
        '"<!@(node native/sources.cjs --unity common linux)"',
        '"<!@(node native/sources.cjs --unity common linux)", "native/macos/peer_macos.cc"',
      ),
    );
    assert.not.equal(gypSources(dir, 'linux'), expected('linux'));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test.run();
