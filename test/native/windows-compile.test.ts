import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { spawn, spawnSync } from 'node:child_process';
import {
  copyFileSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { haveCommand, needFacility } from '../helpers/facility.js';

const haveMingw = (): boolean =>
  needFacility(haveCommand('x86_64-w64-mingw32-g++-posix'), 'mingw-w64', 'apt-get install g++-mingw-w64-x86-64');

const check = (...files: string[]) =>
  spawnSync('bash', ['scripts/check-windows-native.sh', ...files], { encoding: 'utf8' });

/** An asynchronous spawnSync: {status, stdout, stderr}. */
function runAsync(cmd: string, args: string[]): Promise<{ status: number | null; stdout: string; stderr: string }> {
  return new Promise((resolveRun) => {
    const child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('close', (status) => resolveRun({ status, stdout, stderr }));
  });
}

// The selftest (native/windows/selftest/) links the Win32 pipe core into a plain
// Windows program; its build starts now, beside the syntax check, to save time.
const haveWine = (): boolean => haveCommand('x86_64-w64-mingw32-g++-posix') && haveCommand('wine');
const selftestDir = haveWine() ? mkdtempSync(join(tmpdir(), 'stash-wine-test-')) : '';
const exe = join(selftestDir, 'pipe_selftest.exe');
const selftestBuild = selftestDir ? runAsync('bash', ['scripts/check-windows-native.sh', '--selftest', exe]) : null;

/** One Wine prefix per user, kept between runs: creating it is most of a first run's time. */
const wineEnv = (): NodeJS.ProcessEnv => ({
  ...process.env,
  WINEPREFIX: join(tmpdir(), `stash-wine-${typeof process.getuid === 'function' ? process.getuid() : 0}`),
  WINEDEBUG: '-all',
  WINEDLLOVERRIDES: 'mscoree,mshtml=',
});

test('native/windows and native/common compile (syntax) with mingw-w64', () => {
  if (!haveMingw()) return;
  const r = check();
  assert.is(r.status, 0, `mingw syntax check failed:\n${r.stdout}\n${r.stderr}`);
  assert.not.match(r.stdout, /FAIL/);
  // Every Windows source and header is in the run, the named pipe and the console prompt included.
  const expected = readdirSync('native/windows').filter((f) => /\.(cc|h)$/.test(f));
  for (const f of [
    'pipe_windows.cc',
    'pipe_windows.h',
    'pipe_core_windows.cc',
    'pipe_core_windows.h',
    'console_windows.cc',
  ])
    assert.ok(expected.includes(f), f);
  for (const f of expected) assert.match(r.stdout, new RegExp(`^ok {3}native/windows/${f.replace('.', '\\.')}$`, 'm'));
  // And what every build shares: native/sources.json's common sources and native/common's headers (not the Unix-only *_posix ones).
  const common = [
    ...(JSON.parse(readFileSync('native/sources.json', 'utf8')) as { common: string[] }).common,
    ...readdirSync('native/common')
      .filter((f) => f.endsWith('.h') && !f.endsWith('_posix.h'))
      .map((f) => `native/common/${f}`),
  ];
  assert.ok(common.includes('native/common/harden.cc'), 'harden.cc');
  for (const f of common) assert.match(r.stdout, new RegExp(`^ok {3}${f.replace(/\./g, '\\.')}$`, 'm'));
});

test('the check fails when a Win32 call in the pipe source is wrong', () => {
  if (!haveMingw()) return;
  // A copy of native/windows beside a link to native/common, so the relative includes resolve.
  const root = mkdtempSync(join(tmpdir(), 'stash-wincheck-'));
  try {
    mkdirSync(join(root, 'windows'));
    symlinkSync(resolve('native/common'), join(root, 'common'));
    for (const f of readdirSync('native/windows').filter((n) => /\.(cc|h)$/.test(n)))
      copyFileSync(join('native/windows', f), join(root, 'windows', f));
    const source = readFileSync('native/windows/pipe_core_windows.cc', 'utf8');
    const call = 'GetNamedPipeClientProcessId(instance_, &pid)';
    assert.ok(source.includes(call), 'the pipe server reads the client pid');
    const broken = join(root, 'windows', 'pipe_core_windows.cc');
    writeFileSync(broken, source.replace(call, 'GetNamedPipeClientProcessId(instance_)'));
    const r = check(broken);
    assert.is(r.status, 1, r.stdout);
    assert.match(r.stdout, /^FAIL .*pipe_core_windows\.cc$/m);
    assert.match(r.stderr, /GetNamedPipeClientProcessId/);
    // The unmodified copy passes the same way, so the failure above is the mutation's.
    writeFileSync(broken, source);
    assert.is(check(broken).status, 0);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});

test('the Win32 pipe core runs under Wine: claim, stored DACL, pid and SID checks both ways, bytes, stop', async () => {
  if (!needFacility(haveWine(), 'mingw-w64 and Wine', 'apt-get install g++-mingw-w64-x86-64 wine wine64')) return;
  try {
    const build = await selftestBuild!;
    assert.is(build.status, 0, build.stderr);
    const run = spawnSync('wine', [exe], { env: wineEnv(), encoding: 'utf8', timeout: 45_000 });
    const out = run.stdout ?? '';
    assert.not.match(out, /^FAIL/m, out);
    assert.is(run.status, 0, `${out}\n${run.stderr}`);
    for (const line of [
      'first instance: FILE_FLAG_FIRST_PIPE_INSTANCE, owner-only DACL',
      'client connects; the serving process runs as our user',
      'GetNamedPipeServerProcessId names the serving process',
      'GetNamedPipeClientProcessId names the client process',
      'bytes client -> server',
      'bytes server -> client',
      'owner is the current user',
      'DACL is protected (nothing inherited)',
      'DACL has exactly one entry',
      'the entry names the current user',
      'a second concurrent client is served',
      'no such pipe: ENOENT',
      'a pid with no process is refused',
      'Stop() ends a waiting Next()',
      'the name is free again once the last handle is closed',
    ]) {
      assert.ok(
        out.split('\n').some((l) => l.startsWith(`ok   ${line}`)),
        `missing: ok   ${line}\n${out}`,
      );
    }
    assert.match(out, /^0 failure\(s\)$/m);
  } finally {
    rmSync(selftestDir, { recursive: true, force: true });
  }
});

test.run();
