/**
 * Members writing one linked file at the same time, with real child
 * processes: a writer descheduled between its check and its rename, a
 * program that takes no lock replacing the file under a write, and a write
 * that something else replaced afterwards. An acknowledged write is never
 * lost, and a refused or replaced one can be merged back from the vault.
 */
import { spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { mergeShared } from '../../src/vault/sharing/index.js';
import { tsNode } from '../helpers/facility.js';
import { cleanup, expectCode, PASSWORD } from './vault-fixture.js';
import { read, threeMembers, write, type Person } from './sharing-people.js';

test.after.each(cleanup);

const childPath = fileURLToPath(new URL('./fixtures/sharing-child.ts', import.meta.url));

/** Starts a slow write of `entry` by `p`; resolves once it is waiting at `at`, with a promise of its output. */
async function slowWrite(
  p: Person,
  file: string,
  entry: string,
  at: 'rename' | 'check',
  ms: number,
): Promise<{ done: Promise<string> }> {
  const child = spawn(...tsNode(childPath, 'slow', p.dir, 'team', PASSWORD, file, entry, String(ms), at), {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stderr.on('data', (d) => {
    err += d;
  });
  const done = new Promise<string>((resolve) =>
    child.on('close', (code) => resolve(`${out}exit ${code}${err ? `\n${err}` : ''}`)),
  );
  await new Promise<void>((resolve, reject) => {
    child.stdout.on('data', (d) => {
      out += d;
      if (out.includes('waiting')) resolve();
    });
    child.on('close', () => reject(new Error(`the slow writer ended before it waited: ${out}${err}`)));
  });
  return { done }; // not `done` itself: an async function would wait for it
}

test("a writer stalled between its check and its rename holds the lock: the other member's write waits and lands on top", async () => {
  const { alice, bob, carol, file } = await threeMembers();
  const { done: bobDone } = await slowWrite(bob, file, 'FROM_BOB', 'rename', 1500);
  const started = Date.now();
  write(alice, 'team', 'FROM_ALICE', 'a'); // returned: acknowledged
  const waited = Date.now() - started;
  assert.match(await bobDone, /^waiting\nwritten\nexit 0/);
  const seen = read(carol, 'team');
  assert.is(seen.get('FROM_ALICE'), 'a', "Alice's acknowledged write is in the file");
  assert.is(seen.get('FROM_BOB'), 'FROM_BOB from a slow writer');
  assert.ok(waited > 1000, `Alice's write waited for Bob's lock (${waited} ms)`);
  write(alice, 'team', 'NEXT_A', '1'); // neither writer is left refused
  write(bob, 'team', 'NEXT_B', '2');
  assert.equal([...read(carol, 'team').keys()], ['A', 'FROM_ALICE', 'FROM_BOB', 'NEXT_A', 'NEXT_B']);
});

test('a program that takes no lock replacing the file under a write: nothing written (75), and that version can be merged back', async () => {
  const { alice, bob, carol, file } = await threeMembers();
  const base = readFileSync(file);
  write(alice, 'team', 'FROM_ALICE', 'a'); // Alice's version, pushed from another checkout
  const alices = readFileSync(file);
  writeFileSync(file, base);
  const { done: bobDone } = await slowWrite(bob, file, 'FROM_BOB', 'check', 20_000);
  writeFileSync(file, alices); // git pull: no lock, a file put in place under Bob's write
  writeFileSync(`${file}.go`, '');
  const copy = join(bob.dir, 'shared', 'team.last-write.stash');
  const out = await bobDone;
  assert.match(
    out,
    new RegExp(
      `^waiting\\nSHARE_CHANGED: .*changed while this write was being made .*nothing was written: run the command again \\(or take this version as it was made: stash container merge team ${copy}\\)\\nexit 0`,
    ),
  );
  assert.not.ok(read(carol, 'team').has('FROM_BOB'));
  assert.is(mergeShared(bob.dir, bob.key, 'team', copy).outcome, 'merged');
  const seen = read(carol, 'team');
  assert.equal([seen.get('FROM_ALICE'), seen.get('FROM_BOB')], ['a', 'FROM_BOB from a slow writer']);
  write(alice, 'team', 'NEXT_A', '1');
  write(bob, 'team', 'NEXT_B', '2');
});

test('a write that something else replaced afterwards is kept in the vault: the refusal names the copy, and merge brings it back', async () => {
  const { alice, bob, carol, file } = await threeMembers();
  const base = readFileSync(file);
  write(alice, 'team', 'MINE', 'm'); // acknowledged, version 2
  writeFileSync(file, base); // a sync client puts the older copy back
  write(bob, 'team', 'THEIRS', 't'); // and Bob writes on top of it: another version 2
  const copy = join(alice.dir, 'shared', 'team.last-write.stash');
  const err = expectCode(() => write(alice, 'team', 'X', 'x'), 'SHARE_DIVERGED');
  assert.match(
    err.message,
    new RegExp(
      `Your own last version \\(2\\), which this file lacks, is kept in ${copy}: stash container merge team ${copy} brings it back\\.$`,
    ),
  );
  assert.is(mergeShared(alice.dir, alice.key, 'team', copy).outcome, 'merged');
  write(alice, 'team', 'X', 'x');
  write(bob, 'team', 'Y', 'y'); // Bob takes the merged version as a later one
  assert.equal([...read(carol, 'team').keys()], ['A', 'MINE', 'THEIRS', 'X', 'Y']);
});

test.run();
