/**
 * The activity registry against real processes: children and grandchildren of
 * this test, a sibling, pid 1, a child that ignores SIGTERM.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { ActivityError, ActivityRegistry, type ActivityKind } from '../../src/agent/activities.js';
import { parseProcStat, readProcInfo, sessionMembers } from '../../src/agent/proc-info/index.js';
import { errorCode } from '../../src/errors.js';
import { join } from 'node:path';
import { haveCommand, isRoot, needFacility } from '../helpers/facility.js';
import { asNobody, readableCopy } from '../helpers/readable-copy.js';

const children = new Set<ChildProcess>();
process.on('exit', () => {
  for (const c of children) c.kill('SIGKILL');
});

/** Starts `sh -c script`; resolves once it printed its first line (returned). */
async function startShell(script: string): Promise<{ child: ChildProcess; line: string }> {
  const child = spawn('sh', ['-c', script], { stdio: ['ignore', 'pipe', 'inherit'] });
  children.add(child);
  child.once('exit', () => children.delete(child));
  const line = await new Promise<string>((resolve, reject) => {
    let out = '';
    child.stdout!.on('data', (d) => {
      out += d;
      if (out.includes('\n')) resolve(out.split('\n')[0]!.trim());
    });
    child.once('exit', (code) => reject(new Error(`child exited early (${code})`)));
  });
  return { child, line };
}

const sleeper = () => startShell('echo ready; exec sleep 30');

function exited(child: ChildProcess): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
  if (child.exitCode !== null || child.signalCode !== null)
    return Promise.resolve({ code: child.exitCode, signal: child.signalCode });
  return once(child, 'exit').then(([code, signal]) => ({
    code: code as number | null,
    signal: signal as NodeJS.Signals | null,
  }));
}

/**
 * Runs `fn` and records the delay of every timer set meanwhile: the waits of terminateAll between its looks at
 * the processes, a count of what it asked for that no load can stretch.
 */
async function timersDuring<T>(fn: () => Promise<T>): Promise<{ result: T; delays: number[] }> {
  const real = globalThis.setTimeout;
  const delays: number[] = [];
  globalThis.setTimeout = ((callback: (...args: unknown[]) => void, ms?: number, ...args: unknown[]) => {
    delays.push(ms ?? 0);
    return real(callback, ms, ...args);
  }) as typeof setTimeout;
  try {
    return { result: await fn(), delays };
  } finally {
    globalThis.setTimeout = real;
  }
}

function expectCode(fn: () => unknown, code: string): void {
  try {
    fn();
  } catch (err) {
    assert.instance(err, ActivityError);
    assert.is(errorCode(err), code);
    return;
  }
  assert.unreachable(`expected ${code}`);
}

function registry(opts: { maxEntries?: number; now?: () => number } = {}) {
  const changes: ActivityKind[][] = [];
  const reg = new ActivityRegistry({ onChange: (k) => changes.push(k), ...opts });
  return { reg, changes };
}

test('registers its own pid and a child; tokens are 128-bit hex; onChange reports the kinds', async () => {
  const { child } = await sleeper();
  const { reg, changes } = registry();
  const t1 = reg.register(process.pid, process.pid, 'env');
  const t2 = reg.register(process.pid, child.pid!, 'open');
  const t3 = reg.register(process.pid, child.pid!, 'env');
  for (const t of [t1, t2, t3]) assert.match(t, /^[0-9a-f]{32}$/);
  assert.is(new Set([t1, t2, t3]).size, 3);
  assert.is(reg.size, 3);
  assert.equal(changes, [['env'], ['open', 'env']], 'one change per new set of kinds, in spec order');
  assert.equal(
    reg.list().map((a) => [a.pid, a.kind]),
    [
      [process.pid, 'env'],
      [child.pid, 'open'],
      [child.pid, 'env'],
    ],
  );
  reg.unregister(child.pid!, t2);
  assert.equal(changes.at(-1), ['env']);
  reg.clear();
  assert.equal(changes.at(-1), []);
  child.kill('SIGKILL');
  await exited(child);
});

test('a grandchild is accepted for its ancestors and refused for a sibling; pid 1 is refused', async () => {
  // sh prints the pid of its background sleep: a grandchild of this test.
  const { child: parent, line } = await startShell('sleep 30 & echo $!; wait');
  const grandchild = Number(line);
  const { child: sibling } = await sleeper();
  assert.is(readProcInfo(grandchild)?.ppid, parent.pid);
  const { reg } = registry();
  reg.register(process.pid, grandchild, 'unlock');
  reg.register(parent.pid!, grandchild, 'unlock');
  expectCode(() => reg.register(sibling.pid!, grandchild, 'unlock'), 'ACTIVITY_NOT_DESCENDANT');
  expectCode(() => reg.register(sibling.pid!, parent.pid!, 'unlock'), 'ACTIVITY_NOT_DESCENDANT');
  expectCode(() => reg.register(grandchild, parent.pid!, 'unlock'), 'ACTIVITY_NOT_DESCENDANT');
  expectCode(() => reg.register(process.pid, 1, 'unlock'), 'ACTIVITY_NOT_DESCENDANT');
  assert.is(reg.size, 2);
  process.kill(grandchild, 'SIGKILL');
  sibling.kill('SIGKILL');
  await Promise.all([exited(parent), exited(sibling)]);
});

test('unknown kinds, missing processes and the size limit are refused with their codes', async () => {
  const { reg, changes } = registry({ maxEntries: 2 });
  expectCode(() => reg.register(process.pid, process.pid, 'shell'), 'ACTIVITY_UNKNOWN_KIND');
  expectCode(() => reg.register(process.pid, process.pid, ''), 'ACTIVITY_UNKNOWN_KIND');
  expectCode(() => reg.register(process.pid, 0, 'env'), 'ACTIVITY_NO_PROCESS');
  expectCode(() => reg.register(process.pid, 1.5, 'env'), 'ACTIVITY_NO_PROCESS');
  expectCode(() => reg.register(process.pid, 99_999_999, 'env'), 'ACTIVITY_NO_PROCESS');
  reg.register(process.pid, process.pid, 'env');
  reg.register(process.pid, process.pid, 'form');
  expectCode(() => reg.register(process.pid, process.pid, 'vault'), 'ACTIVITY_LIMIT');
  assert.is(reg.size, 2);
  assert.equal(changes, [['env'], ['env', 'form']]);
});

test('unregister needs the exact token issued for that pid', async () => {
  const { child } = await sleeper();
  const { reg, changes } = registry();
  const token = reg.register(process.pid, child.pid!, 'recovery');
  expectCode(() => reg.unregister(child.pid!, 'not-hex'), 'ACTIVITY_BAD_TOKEN');
  expectCode(() => reg.unregister(child.pid!, token.toUpperCase()), 'ACTIVITY_BAD_TOKEN');
  expectCode(() => reg.unregister(child.pid!, token.slice(0, 31)), 'ACTIVITY_BAD_TOKEN');
  const flipped = (token[0] === '0' ? '1' : '0') + token.slice(1);
  expectCode(() => reg.unregister(child.pid!, flipped), 'ACTIVITY_BAD_TOKEN');
  expectCode(() => reg.unregister(process.pid, token), 'ACTIVITY_BAD_TOKEN');
  assert.is(reg.size, 1);
  reg.unregister(child.pid!, token);
  assert.is(reg.size, 0);
  assert.equal(changes, [['recovery'], []]);
  expectCode(() => reg.unregister(child.pid!, token), 'ACTIVITY_BAD_TOKEN');
  child.kill('SIGKILL');
  await exited(child);
});

test('prune drops a dead child and reports [] to onChange', async () => {
  const { child } = await sleeper();
  let clock = 1000;
  const { reg, changes } = registry({ now: () => clock });
  reg.register(process.pid, child.pid!, 'vault');
  clock += 250;
  assert.equal(reg.list(), [{ pid: child.pid!, kind: 'vault', ageMs: 250 }]);
  assert.is(reg.prune(), 0, 'a live child stays');
  child.kill('SIGKILL');
  await exited(child);
  assert.is(reg.prune(), 1);
  assert.is(reg.size, 0);
  assert.equal(changes, [['vault'], []]);
});

test('terminateAll: SIGTERM first, SIGKILL for a child that ignores it, then an empty registry', async () => {
  const { child: polite } = await sleeper();
  // An ignored signal stays ignored across exec, so the sleep ignores SIGTERM.
  const { child: stubborn } = await startShell('trap "" TERM; echo ready; exec sleep 30');
  const { reg, changes } = registry();
  reg.register(process.pid, polite.pid!, 'env');
  reg.register(process.pid, stubborn.pid!, 'open');
  reg.register(process.pid, stubborn.pid!, 'form'); // the same process twice: signalled once
  const started = Date.now();
  const { result, delays } = await timersDuring(() => reg.terminateAll(300));
  const took = Date.now() - started;
  assert.equal(result, { terminated: 1, killed: 1, skipped: 0, failed: 0 });
  // A lower bound: the grace was waited for before the SIGKILL (load can only lengthen it).
  assert.ok(took >= 280, `grace respected (${took} ms)`);
  // And no more than the grace: the waits it asked for add up to 300 ms, less when a loaded machine made each
  // one last longer. (The last may ask a little past the deadline: each asks for at least 1 ms.)
  const waited = delays.reduce((a, b) => a + b, 0);
  assert.ok(waited <= 300 + delays.length, `waits of ${delays.join(', ')} ms (${waited} ms) for a 300 ms grace`);
  assert.equal((await exited(polite)).signal, 'SIGTERM');
  assert.equal((await exited(stubborn)).signal, 'SIGKILL');
  assert.is(reg.size, 0);
  assert.equal(changes.at(-1), []);
});

test('terminateAll returns as soon as every process is gone, well before the grace ends', async () => {
  const { child } = await sleeper();
  const { reg } = registry();
  reg.register(process.pid, child.pid!, 'env');
  const started = Date.now();
  assert.equal(await reg.terminateAll(5000), { terminated: 1, killed: 0, skipped: 0, failed: 0 });
  assert.ok(Date.now() - started < 2000);
  await exited(child);
});

test('terminateAll with a kind filter signals and forgets only those activities', async () => {
  const { child: clip } = await sleeper();
  const { child: kept } = await sleeper();
  const { reg, changes } = registry();
  reg.register(process.pid, clip.pid!, 'form');
  reg.register(process.pid, kept.pid!, 'env');
  assert.equal(await reg.terminateAll(1000, (kind) => kind === 'form'), {
    terminated: 1,
    killed: 0,
    skipped: 0,
    failed: 0,
  });
  assert.equal((await exited(clip)).signal, 'SIGTERM');
  assert.is(kept.exitCode, null, 'the env activity was not signalled');
  assert.equal(
    reg.list().map((a) => a.kind),
    ['env'],
  );
  assert.equal(changes.at(-1), ['env']);
  kept.kill('SIGKILL');
  await exited(kept);
});

test('a process the kernel will not let us signal (EPERM) does not stop the others from being terminated', async () => {
  if (
    !needFacility(
      isRoot && haveCommand('setpriv'),
      'second uid',
      'needs root and setpriv to run the registry as nobody',
    )
  )
    return;
  const { child: rootOwned } = await sleeper();
  // The registry hashes its tokens with sodium: the copy carries the dependencies.
  const copy = readableCopy(['test/fixtures/terminate-as-other-user.mjs'], { dependencies: true });
  const [setpriv, ...asUser] = asNobody;
  const run = spawnSync(
    setpriv,
    [...asUser, copy.node, join(copy.root, 'fixtures', 'terminate-as-other-user.mjs'), String(rootOwned.pid)],
    { encoding: 'utf8', timeout: 30_000 },
  );
  copy.remove();
  assert.is(run.status, 0, run.stderr);
  const out = JSON.parse(run.stdout.trim().split('\n').pop()!);
  assert.equal(out.result, { terminated: 1, killed: 0, skipped: 0, failed: 1 });
  assert.is(out.childSignal, 'SIGTERM', 'the process registered after the refused one was still terminated');
  assert.is(out.size, 0, 'the registry forgot both (its inhibitor goes)');
  assert.is(rootOwned.exitCode, null, 'the root-owned process was not touched');
  rootOwned.kill('SIGKILL');
  await exited(rootOwned);
});

test('a pid whose recorded start time no longer matches is never signalled', async () => {
  const { child } = await sleeper();
  const { reg } = registry();
  reg.register(process.pid, child.pid!, 'env');
  reg.register(process.pid, process.pid, 'open'); // the agent itself: never signalled either
  // What a recycled pid looks like to the registry (see _testSetStartTime).
  reg._testSetStartTime(child.pid!, '1');
  const result = await reg.terminateAll(100);
  assert.equal(result, { terminated: 0, killed: 0, skipped: 2, failed: 0 });
  await new Promise((r) => setTimeout(r, 150));
  assert.is(child.exitCode, null);
  assert.is(child.signalCode, null, 'the process behind the reused pid is untouched');
  assert.is(reg.size, 0);
  // prune treats it the same way.
  reg.register(process.pid, child.pid!, 'env');
  reg._testSetStartTime(child.pid!, '1');
  assert.is(reg.prune(), 1);
  child.kill('SIGKILL');
  await exited(child);
});

test('/proc/<pid>/stat parsing survives spaces and parentheses in comm and rejects garbage', () => {
  const tail = Array.from({ length: 49 }, (_, i) => String(i + 5));
  tail[17] = '777777'; // field 22
  const stat = `4242 (we (ird) ) name)) S 17 ${tail.slice(0).join(' ')}`;
  const info = parseProcStat(4242, stat);
  assert.equal(info, { pid: 4242, ppid: 17, startTime: '777777', zombie: false, session: 6 });
  assert.is(parseProcStat(1, stat.replace(') S 17', ') Z 17')).zombie, true);
  for (const bad of ['', 'garbage', '12 (x S 1 2', '12 (x) S notanumber 3', `12 (x) S 1 ${'9 '.repeat(10)}`]) {
    try {
      parseProcStat(12, bad);
      assert.unreachable(`accepted ${JSON.stringify(bad)}`);
    } catch (err) {
      assert.is(errorCode(err), 'PROC_BAD_STAT');
    }
  }
  const own = readProcInfo(process.pid)!;
  assert.is(own.ppid, process.ppid);
  assert.match(own.startTime, /^\d+$/);
  assert.is(readProcInfo(99_999_999), null);
  if (process.platform === 'linux') {
    const members = sessionMembers(own.session!).map((p) => p.pid);
    assert.ok(members.includes(process.pid), 'this process is in its own session');
    assert.equal(sessionMembers(99_999_999), []);
  }
});

test.run();
