/**
 * A linked shared container lives in a folder that others write (a shared
 * folder, a git checkout): what is found at its path, and what a crashed
 * write leaves beside it, with real child processes so that a read that
 * blocks or a write that dies cannot take the runner with it.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { tsNode } from '../helpers/facility.js';
import { cleanup, PASSWORD } from './vault-fixture.js';
import { read, threeMembers, write } from './sharing-people.js';

test.after.each(cleanup);

const child = fileURLToPath(new URL('./fixtures/sharing-child.ts', import.meta.url));
const isPosix = process.platform !== 'win32';
/** Far above the second or two a child takes on a loaded machine; only a blocked read reaches it. */
const CHILD_TIMEOUT_MS = 45_000;

function run(args: string[]) {
  return spawnSync(...tsNode(child, ...args), {
    encoding: 'utf8',
    timeout: CHILD_TIMEOUT_MS,
    killSignal: 'SIGKILL',
  });
}

test('a FIFO put at a linked path is refused at once, not waited on', async () => {
  if (!isPosix) {
    console.log('  skipped: FIFOs are POSIX');
    return;
  }
  const { alice, file } = await threeMembers();
  rmSync(file);
  const mk = spawnSync('mkfifo', [file]);
  assert.is(mk.status, 0, `mkfifo: ${mk.stderr}`);
  const started = Date.now();
  const r = run(['members', alice.dir, 'team']);
  assert.is(
    r.signal,
    null,
    `the read was still blocked after ${Date.now() - started} ms (opening a FIFO waits for a writer)`,
  );
  assert.is(r.stdout.trim(), 'CONTAINER_CORRUPT', r.stderr);
});

test('a write killed before its rename leaves the linked file as it was; its temp file beside it is swept once stale', async () => {
  const { alice, bob, file } = await threeMembers();
  const before = readFileSync(file);
  const r = run(['crash', bob.dir, 'team', PASSWORD]);
  if (isPosix) assert.is(r.signal, 'SIGKILL', `the child should die mid-write: ${r.stderr}`);
  const folder = dirname(file);
  const temps = () =>
    readdirSync(folder)
      .filter((n) => n.startsWith(`.${basename(file)}.tmp-`))
      .sort();
  const [crashed] = temps();
  assert.ok(crashed, 'the crashed write left its temp file beside the linked file');
  const lock = join(folder, `.${basename(file)}.lock`);
  assert.ok(existsSync(lock), 'and the lock it held when it was killed');
  assert.ok(readFileSync(file).equals(before), 'the linked file is untouched');
  assert.not.ok(read(alice, 'team').has('CRASH'));
  // Another member's write in progress in the same shared folder: a fresh temp file, never touched.
  const fresh = join(folder, `.${basename(file)}.tmp-0123456789ab`);
  writeFileSync(fresh, 'in progress elsewhere');
  const old = new Date(Date.now() - 3600_000);
  utimesSync(join(folder, crashed!), old, old);
  const started = Date.now();
  write(alice, 'team', 'NEXT', 'n');
  assert.ok(Date.now() - started < 2000, "the dead writer's lock is broken at once, not waited for");
  assert.not.ok(existsSync(lock));
  assert.equal(temps(), [basename(fresh)], 'the stale temp file is gone, the fresh one kept');
  assert.is(read(bob, 'team').get('NEXT'), 'n');
});

test.run();
