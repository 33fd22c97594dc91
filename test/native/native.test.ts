import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { spawn, spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { createServer, connect, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { once } from 'node:events';
import { peerCredentials, processPosture, openSystemLog, systemLog, closeSystemLog } from '../../src/native/index.js';
import { haveCommand, isRoot, needFacility, tsNode } from '../helpers/facility.js';
import { asNobody, readableCopy } from '../helpers/readable-copy.js';

const child = join(process.cwd(), 'test', 'fixtures', 'native-child.ts');

function listen(path: string): Promise<{ server: Server; accepted: Promise<Socket> }> {
  return new Promise((resolveListen, reject) => {
    let acceptResolve: (s: Socket) => void = () => {};
    const accepted = new Promise<Socket>((r) => {
      acceptResolve = r;
    });
    const server = createServer((s) => acceptResolve(s));
    server.on('error', reject);
    server.listen(path, () => resolveListen({ server, accepted }));
  });
}

test('peerCredentials reports our own pid/uid/gid on both ends of a socket', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'stash-peer-'));
  const path = join(dir, 's.sock');
  const { server, accepted } = await listen(path);
  const client = connect(path);
  await once(client, 'connect');
  const serverSide = await accepted;
  const a = peerCredentials(serverSide);
  const b = peerCredentials(client);
  for (const c of [a, b]) {
    assert.is(c.pid, process.pid);
    assert.is(c.uid, process.getuid!());
    assert.is(c.gid, process.getgid!());
  }
  client.destroy();
  serverSide.destroy();
  server.close();
  rmSync(dir, { recursive: true, force: true });
});

test('peerCredentials reports a child client by its real pid', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'stash-peer-'));
  const path = join(dir, 's.sock');
  const { server, accepted } = await listen(path);
  const proc = spawn(...tsNode(child, 'connect', path), {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const serverSide = await accepted;
  const cred = peerCredentials(serverSide);
  assert.is(cred.pid, proc.pid);
  assert.is.not(cred.pid, process.pid);
  assert.is(cred.uid, process.getuid!());
  serverSide.end();
  await once(proc, 'close');
  server.close();
  rmSync(dir, { recursive: true, force: true });
});

test('peerCredentials reports the uid of a client running as another user', async () => {
  if (!needFacility(isRoot && haveCommand('setpriv'), 'second uid', 'needs root and setpriv to run a client as nobody'))
    return;
  const dir = mkdtempSync(join(tmpdir(), 'stash-peer-'));
  chmodSync(dir, 0o755);
  const path = join(dir, 's.sock');
  const { server, accepted } = await listen(path);
  chmodSync(path, 0o666);
  // nobody must be able to read the test tree to run the fixture; run plain JS instead.
  const script = `const s=require('net').connect(${JSON.stringify(path)});s.on('connect',()=>console.log(process.pid));s.on('close',()=>process.exit(0));s.on('error',e=>{console.error(e.message);process.exit(2)})`;
  const copy = readableCopy(); // a Node binary nobody can run (a fetched Node line may sit in a private folder)
  const [setpriv, ...asUser] = asNobody;
  const proc = spawn(setpriv, [...asUser, copy.node, '-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
  const serverSide = await accepted;
  const cred = peerCredentials(serverSide);
  assert.is(cred.uid, 65534);
  assert.is(cred.gid, 65534);
  assert.is(cred.pid, proc.pid);
  serverSide.end();
  await once(proc, 'close');
  copy.remove();
  server.close();
  rmSync(dir, { recursive: true, force: true });
});

test('peerCredentials on a bad descriptor throws with an errno code', () => {
  try {
    peerCredentials(987654);
    assert.unreachable('should throw');
  } catch (err) {
    assert.is((err as { code?: string }).code, 'EBADF');
    assert.match((err as Error).message, /SO_PEERCRED/);
  }
  assert.throws(() => peerCredentials(-1), /not a file descriptor/);
});

function abortIn(dir: string, mode: string): void {
  // ulimit -c unlimited first, so that only hardenProcess can be what stops the core file.
  const [node, args] = tsNode(child, mode);
  const r = spawnSync('sh', ['-c', `ulimit -c unlimited; exec "$@"`, 'sh', node, ...args], {
    cwd: dir,
    stdio: 'ignore',
  });
  assert.is(r.signal, 'SIGABRT', `child ${mode} should die of SIGABRT`);
}

test('after hardenProcess a crashing child leaves no core file', () => {
  const corePattern = existsSync('/proc/sys/kernel/core_pattern')
    ? spawnSync('cat', ['/proc/sys/kernel/core_pattern']).stdout.toString().trim()
    : '';
  const plainDir = mkdtempSync(join(tmpdir(), 'stash-core-plain-'));
  const hardDir = mkdtempSync(join(tmpdir(), 'stash-core-hard-'));
  try {
    abortIn(plainDir, 'plain-abort');
    abortIn(hardDir, 'harden-abort');
    const plainCores = readdirSync(plainDir).filter((f) => f.startsWith('core'));
    const hardCores = readdirSync(hardDir).filter((f) => f.startsWith('core'));
    assert.equal(hardCores, [], 'hardened child wrote a core file');
    // The control proves the test can fail: where cores go to files in the cwd, the unhardened child writes one.
    if (
      needFacility(
        corePattern.startsWith('core'),
        'core files in the working folder',
        `core_pattern is ${JSON.stringify(corePattern)}, so cores do not land in the cwd and the control cannot show the test can fail`,
      )
    ) {
      assert.ok(plainCores.length > 0, 'control child wrote no core file, so the test proves nothing');
    }
  } finally {
    rmSync(plainDir, { recursive: true, force: true });
    rmSync(hardDir, { recursive: true, force: true });
  }
});

test('hardenProcess makes the process non-dumpable, as /proc shows', async () => {
  const proc = spawn(...tsNode(child, 'harden-wait'), { stdio: ['pipe', 'pipe', 'inherit'] });
  const [line] = (await once(proc.stdout!, 'data')) as [Buffer];
  const report = JSON.parse(line.toString());
  assert.is(report.dumpable, false);
  assert.is(report.coreDumpsDisabled, true);
  assert.is(report.ptraceBlocked, true);
  assert.equal(report.coreLimit, { soft: 0, hard: 0 });
  assert.ok(report.actions.length >= 2);
  // The report is native/common/harden.cc's on every OS; the steps are the OS's.
  assert.equal(Object.keys(report), [
    'dumpable',
    'coreLimit',
    'memlockLimit',
    'actions',
    'coreDumpsDisabled',
    'ptraceBlocked',
  ]);
  if (process.platform === 'linux') {
    assert.equal(report.actions, ['setrlimit(RLIMIT_CORE, 0)', 'prctl(PR_SET_DUMPABLE, 0)']);
    // A non-dumpable process's /proc/<pid>/status belongs to root, and its
    // CoreDumping/… fields stay readable; a same-user reader loses ptrace access to /proc/<pid>/mem.
    const status = statSync(`/proc/${proc.pid}/status`);
    assert.is(status.uid, 0, '/proc/<pid>/status of a non-dumpable process is owned by root');
  }
  proc.stdin!.end();
  await once(proc, 'close');
});

test('a non-root hardened child is shown as not dumpable in /proc', async () => {
  if (!needFacility(isRoot && haveCommand('setpriv'), 'second uid', 'needs root and setpriv')) return;
  // As nobody, /proc/<pid> files are owned by nobody until the process turns non-dumpable, then by root:
  // run as root, the check above cannot tell the two apart; as nobody it can.
  // From a readable copy of the compiled package: nobody may not be able to enter the checkout.
  const copy = readableCopy();
  const [setpriv, ...asUser] = asNobody;
  const nobody = (args: string[]) => spawn(setpriv, [...asUser, ...args], { stdio: ['pipe', 'pipe', 'inherit'] });
  const plain = nobody([
    copy.node,
    '-e',
    `console.log(process.pid);process.stdin.once('data',()=>{});setTimeout(()=>{},60000)`,
  ]);
  await once(plain.stdout!, 'data');
  assert.is(statSync(`/proc/${plain.pid}/status`).uid, 65534, 'an ordinary process owns its /proc entries');
  plain.kill();
  await once(plain, 'close');
  const hardenWait = `const { hardenProcess } = await import(${JSON.stringify(pathToFileURL(join(copy.root, 'dist', 'native', 'index.js')).href)});
    process.stdout.write(JSON.stringify(hardenProcess()) + '\\n'); process.stdin.resume(); process.stdin.on('end', () => process.exit(0));`;
  const hard = nobody([copy.node, '--input-type=module', '-e', hardenWait]);
  const [line] = (await once(hard.stdout!, 'data')) as [Buffer];
  assert.is(JSON.parse(line.toString()).dumpable, false);
  assert.is(
    statSync(`/proc/${hard.pid}/status`).uid,
    0,
    'the hardened nobody process: /proc/<pid>/status now belongs to root',
  );
  hard.stdin!.end();
  await once(hard, 'close');
  copy.remove();
});

test('processPosture reads the memlock and core limits', () => {
  const posture = processPosture();
  assert.type(posture.dumpable, 'boolean');
  assert.ok(posture.memlockLimit !== null);
  assert.type(posture.memlockLimit!.soft, 'number');
});

test('systemLog writes through syslog without throwing, and rejects bad levels', () => {
  openSystemLog('stash-test');
  systemLog('info', 'stash native test message %s %n (format characters are not interpreted)');
  assert.throws(() => systemLog('bogus' as never, 'x'), /unknown log level/);
  assert.throws(() => openSystemLog(''), /1..64/);
  closeSystemLog();
});

test.run();
