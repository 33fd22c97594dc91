/**
 * The lock beside a linked shared file (src/vault/sharing/file-lock.ts): who
 * waits, for how long, and who may break a lock and when, with real holder
 * processes (one killed with SIGKILL) and a second Unix user through setpriv.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chmodSync, chownSync, existsSync, mkdirSync, readFileSync, utimesSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { VaultError } from '../../src/vault/errors.js';
import { assertLockHeld, lockPathOf, withFileLock } from '../../src/vault/sharing/file-lock.js';
import { haveCommand, isRoot, needFacility, tsNode } from '../helpers/facility.js';
import { asNobody, readableCopy } from '../helpers/readable-copy.js';
import { cleanup, expectCode, tempRoot } from './vault-fixture.js';

test.after.each(cleanup);

const holderPath = fileURLToPath(new URL('./fixtures/lock-holder.ts', import.meta.url));

/** A process holding the lock of `file` until killed. */
async function holder(file: string): Promise<ChildProcess> {
  const child = spawn(...tsNode(holderPath, file, '60000'), {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  await new Promise<void>((resolve, reject) => {
    child.stdout!.on('data', (d) => {
      if (String(d).includes('held')) resolve();
    });
    child.on('close', (code) => reject(new Error(`the holder ended (${code}) before it held the lock`)));
  });
  return child;
}

const killed = (child: ChildProcess) =>
  new Promise<void>((resolve) => {
    child.on('close', () => resolve());
    child.kill('SIGKILL');
  });

/** Runs `fn` under the lock of `file` with a short wait; returns how long it took to get it. */
function timedLock(file: string, waitMs: number): number {
  const started = Date.now();
  withFileLock(file, () => {}, waitMs);
  return Date.now() - started;
}

/** A lock file as another writer leaves it. */
function plant(file: string, holderFields: Record<string, unknown> | null, ageMs = 0): string {
  const lock = lockPathOf(file);
  writeFileSync(
    lock,
    holderFields === null
      ? ''
      : JSON.stringify({ uid: 0, at: Date.now() - ageMs, token: 'f'.repeat(24), ...holderFields }),
    { mode: 0o644 },
  );
  const then = new Date(Date.now() - ageMs);
  utimesSync(lock, then, then);
  return lock;
}

test('a live holder is waited for a bounded time, then 75 naming it; killed with SIGKILL, its lock is broken at once', async () => {
  const file = join(tempRoot(), 'team.stash');
  const child = await holder(file);
  try {
    const started = Date.now();
    const err = expectCode(
      () => withFileLock(file, () => assert.unreachable('ran under a held lock'), 400),
      'SHARE_CHANGED',
    );
    assert.ok(Date.now() - started >= 400, 'it waited');
    assert.match(
      err.message,
      new RegExp(
        `is being written by another member \\(process ${child.pid} of user \\d+ on ${hostname()}, since .*\\); nothing was written: run the command again`,
      ),
    );
  } finally {
    await killed(child);
  }
  assert.ok(existsSync(lockPathOf(file)), 'the killed holder left its lock');
  assert.ok(timedLock(file, 5000) < 1000, 'a dead holder on this host is not waited for');
  assert.not.ok(existsSync(lockPathOf(file)), 'and the lock is released afterwards');
});

test('a lock of another host is broken once older than 15 s, a half-written one once older than 5 s, not before', () => {
  const file = join(tempRoot(), 'team.stash');
  plant(file, { pid: 1, host: 'elsewhere.example' }, 10_000);
  expectCode(() => timedLock(file, 200), 'SHARE_CHANGED');
  plant(file, { pid: 1, host: 'elsewhere.example' }, 16_000);
  assert.ok(timedLock(file, 200) < 200);
  plant(file, null, 1_000);
  expectCode(() => timedLock(file, 200), 'SHARE_CHANGED');
  plant(file, null, 6_000);
  assert.ok(timedLock(file, 200) < 200);
});

test('a holder whose lock was taken over writes nothing, and leaves the new lock in place', () => {
  const file = join(tempRoot(), 'team.stash');
  withFileLock(file, () => {
    assertLockHeld(file);
    plant(file, { pid: process.pid, host: hostname() }); // someone judged us crashed and took it
    assert.throws(
      () => assertLockHeld(file),
      (e: unknown) =>
        e instanceof VaultError &&
        e.code === 'SHARE_CHANGED' &&
        /took longer than 15 s, and another writer took over its lock/.test(e.message),
    );
  });
  assert.ok(readFileSync(lockPathOf(file), 'utf8').includes('f'.repeat(24)), "the other writer's lock was not removed");
});

test('another Unix user breaks a stale lock in a group-writable folder; in a sticky folder the refusal says who can remove it', () => {
  if (!needFacility(isRoot && haveCommand('setpriv'), 'second uid', 'needs root and setpriv')) return;
  const root = tempRoot();
  chmodSync(root, 0o755);
  const copy = readableCopy(['test/vault/fixtures/lock-child.mjs'], { dependencies: true });
  try {
    const asOther = (file: string) =>
      spawnSync(asNobody[0], [...asNobody.slice(1), copy.node, join(copy.root, 'fixtures', 'lock-child.mjs'), file], {
        encoding: 'utf8',
        timeout: 30_000,
      });
    const dead = spawnSync(process.execPath, ['-e', '0']).pid!; // a pid that no longer runs
    const group = join(root, 'group');
    mkdirSync(group);
    chownSync(group, 0, 65534);
    chmodSync(group, 0o2775); // the members' group (nobody's), setgid, not sticky
    plant(join(group, 'team.stash'), { pid: dead, host: hostname() });
    const r = asOther(join(group, 'team.stash'));
    assert.is(r.stdout, 'locked\n', r.stderr);
    assert.not.ok(existsSync(lockPathOf(join(group, 'team.stash'))));

    const sticky = join(root, 'sticky');
    mkdirSync(sticky);
    chmodSync(sticky, 0o1777); // like /tmp
    const lock = plant(join(sticky, 'team.stash'), { pid: dead, host: hostname() });
    const s = asOther(join(sticky, 'team.stash'));
    assert.match(
      s.stdout,
      new RegExp(
        `^PERMISSION: ${lock} was left by a write that did not finish \\(process ${dead} of user 0 on .*\\), and you may not remove it: the folder ${sticky} is sticky \\(like /tmp\\), so only user 0 or the folder's owner can\\. If no stash command of theirs is running, they run: rm ${lock}\\n$`,
      ),
      s.stderr,
    );
  } finally {
    copy.remove();
  }
});

test.run();
