/**
 * The key server's single executables as an operator runs them: with an
 * empty environment (no PATH, so no node and no npm; no HOME), the x64 one
 * serves a developer-mode publish, verification and fetch on loopback, and
 * keeps its native addon in a private cache folder that it checks before
 * loading; the arm64 one does the same under qemu-user. Where the
 * executables come from: test/release/sea-harness.ts.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmodSync, chownSync, existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { haveCommand, isRoot, needFacility } from '../helpers/facility.js';
import {
  AARCH64_SYSROOT,
  consoleLink,
  freePort,
  publishVerifyFetch,
  removeBuilt,
  singleExecutable,
  startSea,
  version,
  which,
} from './sea-harness.js';

const uid = process.getuid?.() ?? 0;
const sha256 = (path: string) => createHash('sha256').update(readFileSync(path)).digest('hex');
const sodiumPrebuild = (target: string) =>
  join('node_modules', 'sodium-native', 'prebuilds', target, 'sodium-native.node');

test.after(() => removeBuilt());

test('x64, empty environment: --version, node flags refused as arguments, and a developer-mode publish, verification and fetch', async () => {
  const exe = singleExecutable('linux-x64');
  const v = spawnSync(exe, ['--version'], { env: {}, encoding: 'utf8' });
  assert.is(v.status, 0, v.stderr);
  assert.is(v.stdout, `stash_key_server ${version}\n`);
  // Options after the executable's name reach our parser, not node: a clear usage error, never a silently ignored flag.
  const flag = spawnSync(exe, ['--max-old-space-size=64', 'run'], { env: {}, encoding: 'utf8' });
  assert.is(flag.status, 64, flag.stderr);
  assert.match(flag.stderr, /^stash_key_server: unknown option: --max-old-space-size/);

  // No environment at all: the addon cache falls back to the temporary folder, one per uid.
  const cacheBase = join(tmpdir(), `stash_key_server-${uid}`);
  const hadCache = existsSync(cacheBase);
  const server = await startSea([exe], ['run', '--developer', '--bind', `127.0.0.1:${await freePort()}`], {});
  try {
    const flow = await publishVerifyFetch(server.url, 'alice@example.org', () => consoleLink(server.stdout()));
    assert.is(flow.verification, 'printed');
    assert.ok(flow.refusedBeforeConfirm, 'no fetch before the link is confirmed');
    assert.equal(flow.fetched, [{ sameKey: true, email: 'alice@example.org' }]);
    assert.not.match(server.stderr(), /Warning|ERROR/);

    const dir = join(cacheBase, `${version}-linux-x64`);
    const addon = join(dir, 'sodium-native.node');
    assert.is(statSync(cacheBase).mode & 0o777, 0o700);
    assert.is(statSync(dir).mode & 0o777, 0o700);
    assert.is(statSync(addon).mode & 0o777, 0o500);
    assert.is(statSync(addon).uid, uid);
    assert.is(sha256(addon), sha256(sodiumPrebuild('linux-x64')), 'the cached addon is the embedded prebuild');
  } finally {
    assert.is(await server.stop(), 0, server.stderr());
    if (!hadCache) rmSync(cacheBase, { recursive: true, force: true });
  }
});

/** Starts a developer server with CACHE_DIRECTORY=cache; its exit status and output, or 'listening'. */
async function startWithCache(exe: string, cache: string): Promise<{ listening: boolean; output: string }> {
  try {
    const s = await startSea(
      [exe],
      ['run', '--developer', '--bind', `127.0.0.1:${await freePort()}`],
      { CACHE_DIRECTORY: cache },
      30_000,
    );
    const status = await s.stop();
    assert.is(status, 0, s.stderr());
    return { listening: true, output: s.stdout() + s.stderr() };
  } catch (err) {
    return { listening: false, output: (err as Error).message };
  }
}

test('x64 addon cache: a cached addon that differs from the embedded one is replaced before loading; a folder another user owns or may write is refused', async () => {
  const exe = singleExecutable('linux-x64');
  const cache = mkdtempSync(join(tmpdir(), 'stash-sea-cache-'));
  try {
    const addon = join(cache, `${version}-linux-x64`, 'sodium-native.node');
    const first = await startWithCache(exe, cache);
    assert.ok(first.listening, first.output);
    const good = sha256(addon);
    // Another build's addon (or a damaged write) under the same name: overwritten from the embedded copy.
    chmodSync(addon, 0o700);
    writeFileSync(addon, 'not an ELF file');
    assert.ok((await startWithCache(exe, cache)).listening);
    assert.is(sha256(addon), good);

    chmodSync(join(cache, `${version}-linux-x64`), 0o777);
    const open = await startWithCache(exe, cache);
    assert.not.ok(open.listening);
    assert.match(open.output, /exited \(73\)/);
    assert.match(open.output, /stash_key_server: .*-linux-x64 may be written by other users \(mode 777\)/);
    chmodSync(join(cache, `${version}-linux-x64`), 0o700);

    if (needFacility(isRoot, 'root', 'handing the cache folder to another uid needs chown')) {
      chownSync(join(cache, `${version}-linux-x64`), 65534, 65534);
      const foreign = await startWithCache(exe, cache);
      assert.not.ok(foreign.listening);
      assert.match(foreign.output, /belongs to uid 65534, not to this process \(uid 0\)/);
    }
  } finally {
    rmSync(cache, { recursive: true, force: true });
  }
});

test('arm64 under qemu-user, empty environment: --version, then run --developer serves a publish, verification and fetch', async () => {
  if (
    !needFacility(
      haveCommand('qemu-aarch64') && existsSync(AARCH64_SYSROOT),
      'qemu-user',
      `needs qemu-aarch64 and the arm64 C library in ${AARCH64_SYSROOT} (apt-get install qemu-user g++-aarch64-linux-gnu)`,
    )
  )
    return;
  const exe = singleExecutable('linux-arm64');
  // ELF e_machine (2 bytes at offset 18): 183 is EM_AARCH64.
  assert.is(readFileSync(exe).readUInt16LE(18), 183, 'an arm64 executable');
  const qemu = [which('qemu-aarch64'), '-L', AARCH64_SYSROOT, exe];
  const v = spawnSync(qemu[0]!, [...qemu.slice(1), '--version'], { env: {}, encoding: 'utf8', timeout: 120_000 });
  assert.is(v.status, 0, v.stderr);
  assert.is(v.stdout, `stash_key_server ${version}\n`);
  const cache = mkdtempSync(join(tmpdir(), 'stash-sea-arm64-'));
  try {
    const server = await startSea(
      qemu,
      ['run', '--developer', '--bind', `127.0.0.1:${await freePort()}`],
      { CACHE_DIRECTORY: cache },
      180_000,
    );
    try {
      const flow = await publishVerifyFetch(server.url, 'bob@example.org', () => consoleLink(server.stdout()));
      assert.equal(flow.fetched, [{ sameKey: true, email: 'bob@example.org' }]);
    } finally {
      assert.is(await server.stop(), 0, server.stderr());
    }
    assert.is(
      sha256(join(cache, `${version}-linux-arm64`, 'sodium-native.node')),
      sha256(sodiumPrebuild('linux-arm64')),
    );
  } finally {
    rmSync(cache, { recursive: true, force: true });
  }
});

test.run();
