/**
 * The CLI's compiled-code cache (src/cli/launch.ts, code-cache.ts) through the
 * real binary: where it lives and with what modes, that a damaged, stale,
 * foreign or shared cache is ignored (and rewritten where that is safe),
 * that it never holds a value or a password, and that a stale bundle falls
 * back to the ES modules. The same on every Node line (Node's own compile
 * cache is not used: launch.ts).
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { spawnSync } from 'node:child_process';
import {
  chmodSync,
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { cliEnv, type CliEnv } from './harness.js';

const tracing = { STASH_CODE_CACHE: 'trace' };

function ourCacheDir(t: CliEnv): string {
  return join(t.env.XDG_CACHE_HOME!, 'stash', 'code-cache');
}

function cacheFile(t: CliEnv): string {
  return join(ourCacheDir(t), `cli-node${process.versions.node}-${process.arch}.bin`);
}

/** The trace line about the cache of this run ('missing', 'accepted', ...). */
function statusOf(stderr: string): string | null {
  return /code cache \S+: ([a-z]+)/.exec(stderr)?.[1] ?? null;
}

/** A vault with one entry, its key cached by the agent; the cache files of those runs removed. */
async function withEntry(t: CliEnv, value = 'tok-code-cache'): Promise<void> {
  await t.initVault(['work']);
  const set = await t.run(['set', 'work', 'TOKEN', '--password-file', t.pwFile], { input: value });
  assert.is(set.code, 0, set.stderr);
  rmSync(join(t.env.XDG_CACHE_HOME!, 'stash'), { recursive: true, force: true });
}

/** The bytes of every file under `dir`. */
function filesUnder(dir: string): Buffer[] {
  if (!existsSync(dir)) return [];
  const out: Buffer[] = [];
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) out.push(...filesUnder(p));
    else if (e.isFile()) out.push(readFileSync(p));
  }
  return out;
}

test('the first run writes the cache owner-only, the next run uses it', async () => {
  const t = cliEnv({ STASH_TEST_CODE_CACHE: undefined }); // its own, empty cache folder
  try {
    await withEntry(t);
    const first = await t.run(['get', 'work', 'TOKEN'], { env: tracing });
    assert.is(first.code, 0, first.stderr);
    assert.is(first.stdout, 'tok-code-cache');
    assert.is(statSync(ourCacheDir(t)).mode & 0o777, 0o700);
    assert.is(statSync(join(t.env.XDG_CACHE_HOME!, 'stash')).mode & 0o777, 0o700);
    assert.not.ok(
      existsSync(join(t.env.XDG_CACHE_HOME!, 'stash', 'compile-cache')),
      "Node's compile cache is not used",
    );
    assert.is(statusOf(first.stderr), 'missing');
    assert.match(first.stderr, /code cache written: .* \(made by: get\)/);
    assert.is(statSync(cacheFile(t)).mode & 0o777, 0o600);
    const second = await t.run(['get', 'work', 'TOKEN'], { env: tracing });
    assert.is(second.stdout, 'tok-code-cache');
    assert.is(statusOf(second.stderr), 'accepted');
    assert.not.match(second.stderr, /written/, 'a cache that has this command is not rewritten');
    // Another command adds its functions once; after that nothing is written.
    const list = await t.run(['container', 'list'], { env: tracing });
    assert.is(list.code, 0, list.stderr);
    assert.match(list.stderr, /code cache written: .* \(made by: get, container\)/);
    const again = await t.run(['get', 'work', 'TOKEN'], { env: tracing });
    assert.is(statusOf(again.stderr), 'accepted');
    assert.not.match(again.stderr, /written/);
  } finally {
    await t.dispose();
  }
});

test('a damaged cache is ignored and rewritten (V8 would crash on it), so is a truncated or foreign one', async () => {
  const t = cliEnv({ STASH_TEST_CODE_CACHE: undefined }); // its own, empty cache folder
  try {
    await withEntry(t);
    assert.is((await t.run(['get', 'work', 'TOKEN'])).code, 0);
    const good = readFileSync(cacheFile(t));
    // The layout (src/cli/code-cache.ts): 58-byte header (V8 data length at 52, labels' length
    // at 56), the labels, then the V8 data twice. 4 KiB of the first copy, the one V8 is given,
    // overwritten: fed to V8 this aborts the process (checked: SIGSEGV, SIGTRAP).
    const dataLength = good.readUInt32LE(52);
    const first = 58 + good.readUInt16LE(56);
    const damaged = Buffer.from(good);
    damaged.fill(0xff, first + (dataLength >> 1), first + (dataLength >> 1) + 4096);
    const otherTime = Buffer.from(good);
    otherTime.writeDoubleLE(otherTime.readDoubleLE(44) + 1, 44);
    const cases: Array<[string, Buffer]> = [
      ['damaged', damaged],
      ['truncated', good.subarray(0, good.length - 100)],
      ['another bundle', Buffer.concat([good.subarray(0, 8), Buffer.from('0123'), good.subarray(12)])],
      ['another copy of the bundle file', otherTime],
      ['not a cache', Buffer.from('hello, world\n')],
      ['empty', Buffer.alloc(0)],
    ];
    for (const [what, bytes] of cases) {
      writeFileSync(cacheFile(t), bytes, { mode: 0o600 });
      const r = await t.run(['get', 'work', 'TOKEN'], { env: tracing });
      assert.is(r.signal, null, `${what}: killed by ${r.signal}`);
      assert.is(r.code, 0, `${what}: ${r.stderr}`);
      assert.is(r.stdout, 'tok-code-cache', what);
      assert.is(statusOf(r.stderr), 'invalid', `${what}: ${r.stderr}`);
      assert.match(r.stderr, /code cache written/, `${what} is replaced`);
      const next = await t.run(['get', 'work', 'TOKEN'], { env: tracing });
      assert.is(statusOf(next.stderr), 'accepted', `after ${what}: ${next.stderr}`);
    }
  } finally {
    await t.dispose();
  }
});

test('a cache V8 refuses (made under other V8 flags) is rewritten', async () => {
  const t = cliEnv({ STASH_TEST_CODE_CACHE: undefined }); // its own, empty cache folder
  try {
    await withEntry(t);
    // A V8 flag changes V8's flag hash: a cache made under it does not fit a plain run. --no-opt does on
    // Node 20 to 26 (--no-lazy-feedback-allocation only on 20, --no-maglev not on 20 and 22).
    const withFlag = spawnSync(
      process.execPath,
      ['--no-opt', join(process.cwd(), 'bin', 'stash.js'), 'get', 'work', 'TOKEN'],
      {
        env: t.env,
        encoding: 'utf8',
        timeout: 20_000,
      },
    );
    assert.is(withFlag.status, 0, withFlag.stderr);
    const r = await t.run(['get', 'work', 'TOKEN'], { env: tracing });
    assert.is(r.stdout, 'tok-code-cache');
    assert.is(statusOf(r.stderr), 'rejected', r.stderr);
    assert.match(r.stderr, /code cache written/);
    assert.is(statusOf((await t.run(['get', 'work', 'TOKEN'], { env: tracing })).stderr), 'accepted');
  } finally {
    await t.dispose();
  }
});

test('a cache file or folder that others can write is neither used nor replaced', async () => {
  if (process.platform === 'win32') return;
  const t = cliEnv({ STASH_TEST_CODE_CACHE: undefined }); // its own, empty cache folder
  try {
    await withEntry(t);
    assert.is((await t.run(['get', 'work', 'TOKEN'])).code, 0);
    chmodSync(cacheFile(t), 0o666);
    const before = readFileSync(cacheFile(t));
    const r = await t.run(['get', 'work', 'TOKEN'], { env: tracing });
    assert.is(r.stdout, 'tok-code-cache');
    assert.is(statusOf(r.stderr), 'unsafe');
    assert.not.match(r.stderr, /written/);
    assert.ok(readFileSync(cacheFile(t)).equals(before), 'the file was left alone');
    chmodSync(cacheFile(t), 0o600);
    chmodSync(ourCacheDir(t), 0o777);
    const shared = await t.run(['get', 'work', 'TOKEN'], { env: tracing });
    assert.is(shared.stdout, 'tok-code-cache');
    assert.is(statusOf(shared.stderr), 'unsafe');
    assert.not.match(shared.stderr, /written/);
  } finally {
    await t.dispose();
  }
});

test('the cache never holds a value or a password', async () => {
  const t = cliEnv({ STASH_TEST_CODE_CACHE: undefined }); // its own, empty cache folder
  try {
    const value = 'VALUE-7f3a9c1e-never-in-a-cache';
    await withEntry(t, value);
    for (const args of [
      ['get', 'work', 'TOKEN'],
      ['ls', 'work'],
      ['vault', 'sessions'],
    ]) {
      const r = await t.run(args);
      assert.is(r.code, 0, `${args.join(' ')}: ${r.stderr}`);
    }
    // A run that needs the password (the keys forgotten first) writes a cache too.
    assert.is((await t.run(['vault', 'sessions', 'lock-all'])).code, 0);
    rmSync(join(t.env.XDG_CACHE_HOME!, 'stash'), { recursive: true, force: true });
    const r = await t.run(['get', 'work', 'TOKEN', '--password-file', t.pwFile]);
    assert.is(r.stdout, value);
    const files = filesUnder(join(t.env.XDG_CACHE_HOME!, 'stash'));
    assert.ok(files.length > 0, 'a cache was written');
    for (const f of files) {
      for (const secret of [value, t.password]) {
        assert.not.ok(f.includes(secret) || f.includes(Buffer.from(secret, 'utf16le')), `a cache file holds ${secret}`);
      }
    }
  } finally {
    await t.dispose();
  }
});

test('no cache folder to be had, or STASH_CODE_CACHE=off: the command runs as ever, silently', async () => {
  const t = cliEnv({ STASH_TEST_CODE_CACHE: undefined }); // its own, empty cache folder
  try {
    await withEntry(t);
    const blocker = join(t.home, 'a-file');
    writeFileSync(blocker, 'not a folder');
    const blocked = await t.run(['get', 'work', 'TOKEN'], { env: { XDG_CACHE_HOME: blocker } });
    assert.is(blocked.code, 0, blocked.stderr);
    assert.is(blocked.stdout, 'tok-code-cache');
    assert.is(blocked.stderr, '');
    const off = await t.run(['get', 'work', 'TOKEN'], { env: { STASH_CODE_CACHE: 'off' } });
    assert.is(off.stdout, 'tok-code-cache');
    assert.is(off.stderr, '');
    assert.not.ok(existsSync(join(t.env.XDG_CACHE_HOME!, 'stash')), 'nothing was written');
  } finally {
    await t.dispose();
  }
});

test('a bundle older than dist/cli/main.js (dist/ compiled without the bundle step) is not used: the ES modules run', async () => {
  // A copy of the package whose main.js is dated after the bundle.
  const root = mkdtempSync(join(tmpdir(), 'stash-stale-bundle-'));
  const t = cliEnv({ STASH_TEST_CODE_CACHE: undefined }); // its own, empty cache folder
  try {
    for (const f of ['bin', 'dist']) cpSync(join(process.cwd(), f), join(root, f), { recursive: true });
    cpSync(join(process.cwd(), 'package.json'), join(root, 'package.json'));
    symlinkSync(join(process.cwd(), 'node_modules'), join(root, 'node_modules'));
    mkdirSync(join(root, 'build'));
    symlinkSync(join(process.cwd(), 'build', 'Release'), join(root, 'build', 'Release'));
    const run = (args: string[]) =>
      spawnSync(process.execPath, [join(root, 'bin', 'stash.js'), ...args], {
        env: { ...t.env, ...tracing },
        encoding: 'utf8',
        timeout: 20_000,
      });
    const bundle = join(root, 'dist', 'cli', 'stash.cjs');
    const now = Date.now() / 1000;
    utimesSync(bundle, now - 60, now - 60);
    utimesSync(join(root, 'dist', 'cli', 'main.js'), now, now);
    const stale = run(['--version']);
    assert.is(stale.status, 0, stale.stderr);
    assert.match(stale.stdout, /^stash \d/);
    assert.match(stale.stderr, /stash\.cjs is missing or older than .*main\.js .*running the ES modules/);
    utimesSync(bundle, now, now);
    const current = run(['--version']);
    assert.is(current.status, 0, current.stderr);
    assert.not.match(current.stderr, /running the ES modules/);
  } finally {
    rmSync(root, { recursive: true, force: true });
    await t.dispose();
  }
});

test.run();
