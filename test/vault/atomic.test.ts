/**
 * Crash safety and the writer lock, with real child processes: one is killed
 * with SIGKILL between writing its temp file and renaming it; several others
 * write to one container at the same time.
 */
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import {
  createContainer,
  listContainers,
  readEntries,
  unlockVault,
  unwrapContentKey,
  vaultPaths,
  writeEntry,
} from '../../src/vault/index.js';
import { withVaultLock } from '../../src/vault/lock.js';
import { tsNode } from '../helpers/facility.js';
import { cleanup, expectCode, newVault } from './vault-fixture.js';

test.after.each(cleanup);

const child = fileURLToPath(new URL('./fixtures/vault-child.ts', import.meta.url));
const isPosix = process.platform !== 'win32';

function run(args: string[], key: Buffer) {
  return spawnSync(...tsNode(child, ...args), {
    env: { ...process.env, STASH_TEST_CONTENT_KEY: key.toString('hex') },
    encoding: 'utf8',
  });
}

test('a write killed before its rename leaves the old file readable; the next write cleans up', async () => {
  const v = await newVault();
  createContainer(v.dir, v.key, 'prod');
  const ck = unwrapContentKey(v.dir, v.key, 'prod');
  writeEntry(v.dir, 'prod', ck, 'KEEP', Buffer.from('old'));
  const path = vaultPaths(v.dir).container('prod');
  const before = readFileSync(path);

  const r = run(['crash', v.dir, 'prod'], ck);
  if (isPosix) assert.is(r.signal, 'SIGKILL', `child should die mid-write: ${r.stderr}`);
  const containers = vaultPaths(v.dir).containers;
  const temps = readdirSync(containers).filter((n) => n.includes('.tmp-'));
  assert.is(temps.length, 1, 'the crashed write left its temp file');
  assert.is(
    statSync(join(containers, temps[0]!)).mode & 0o777,
    isPosix ? 0o600 : statSync(join(containers, temps[0]!)).mode & 0o777,
  );
  assert.ok(existsSync(join(v.dir, 'vault.lock')), 'and its lock');

  assert.ok(readFileSync(path).equals(before), 'the container file is untouched');
  const e = readEntries(v.dir, 'prod', ck);
  assert.equal([...e.keys()], ['KEEP']);
  assert.equal(
    listContainers(v.dir).map((c) => [c.name, c.problem]),
    [['prod', null]],
  );
  assert.ok((await unlockVault(v.dir, v.password)).equals(v.key));

  // The dead process's lock is broken at once, and its temp file swept.
  const t0 = Date.now();
  writeEntry(v.dir, 'prod', ck, 'NEXT', Buffer.from('new'));
  assert.ok(Date.now() - t0 < 2000, 'a stale lock does not make writers wait');
  assert.equal(
    readdirSync(containers).filter((n) => n.includes('.tmp-')),
    [],
  );
  assert.not.ok(existsSync(join(v.dir, 'vault.lock')));
  assert.equal([...readEntries(v.dir, 'prod', ck).keys()], ['KEEP', 'NEXT']);
});

test('leftover temp files next to vault.json do not disturb unlocking', async () => {
  const v = await newVault();
  writeFileSync(join(v.dir, '.vault.json.tmp-deadbeef0000'), '{"format": "half');
  assert.ok((await unlockVault(v.dir, v.password)).equals(v.key));
});

test('concurrent writers from several processes lose no update', async () => {
  const v = await newVault();
  createContainer(v.dir, v.key, 'shared');
  const ck = unwrapContentKey(v.dir, v.key, 'shared');
  const writers = ['A', 'B', 'C'];
  const perWriter = 8;
  const results = await Promise.all(
    writers.map(
      (prefix) =>
        new Promise<number | null>((resolve) => {
          const p = spawn(...tsNode(child, 'writer', v.dir, 'shared', prefix, String(perWriter)), {
            env: { ...process.env, STASH_TEST_CONTENT_KEY: ck.toString('hex') },
            stdio: ['ignore', 'ignore', 'inherit'],
          });
          p.on('close', (code) => resolve(code));
        }),
    ),
  );
  assert.equal(results, [0, 0, 0]);
  const names = [...readEntries(v.dir, 'shared', ck).keys()];
  assert.is(names.length, writers.length * perWriter, `got ${names.join(',')}`);
  assert.not.ok(existsSync(join(v.dir, 'vault.lock')));
});

test('a live lock makes writers wait, then fail with VAULT_LOCKED', async () => {
  const v = await newVault();
  const lock = join(v.dir, 'vault.lock');
  // Held by a live process that is not us: our parent (the test runner or shell).
  writeFileSync(lock, JSON.stringify({ pid: process.ppid, host: (await import('node:os')).hostname() }));
  const t0 = Date.now();
  const e = expectCode(() => withVaultLock(v.dir, () => 1, 300), 'VAULT_LOCKED');
  assert.ok(Date.now() - t0 >= 280, 'it waited');
  assert.match(e.message, new RegExp(`process ${process.ppid}`));
  assert.match(e.message, /vault\.lock/);
  assert.ok(existsSync(lock), 'a live lock is not broken');
});

test('a lock of a dead process, or a very old one, is broken', async () => {
  const v = await newVault();
  const lock = join(v.dir, 'vault.lock');
  const dead = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))'], { encoding: 'utf8' });
  writeFileSync(lock, JSON.stringify({ pid: Number(dead.stdout), host: (await import('node:os')).hostname() }));
  assert.is(
    withVaultLock(v.dir, () => 'ran', 300),
    'ran',
  );
  writeFileSync(lock, JSON.stringify({ pid: process.ppid, host: 'some-other-host' }));
  const { utimesSync } = await import('node:fs');
  const old = new Date(Date.now() - 10 * 60_000);
  utimesSync(lock, old, old);
  assert.is(
    withVaultLock(v.dir, () => 'ran again', 300),
    'ran again',
  );
  assert.not.ok(existsSync(lock));
});

test('the lock is re-entrant within a process and released after an exception', async () => {
  const v = await newVault();
  assert.is(
    withVaultLock(v.dir, () => withVaultLock(v.dir, () => 'inner', 100), 100),
    'inner',
  );
  assert.throws(
    () =>
      withVaultLock(v.dir, () => {
        throw new Error('boom');
      }),
    /boom/,
  );
  assert.not.ok(existsSync(join(v.dir, 'vault.lock')));
});

test.run();
