/**
 * History across membership changes, with real vaults and one linked file:
 * removing a member and adding them again is a later version for everyone,
 * while a version that lacks a member's write stays a divergence even when
 * the owner changed the recipient list on the way.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { copyFileSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { wipe, wipeEntries } from '../../src/vault/index.js';
import {
  acceptShared,
  containerMembers,
  mergeShared,
  openSharedContentKey,
  readSharedEntries,
  shareContainer,
  unshareContainer,
} from '../../src/vault/sharing/index.js';
import { decodeShared, SIGNATURE_BYTES } from '../../src/vault/sharing/format.js';
import { assembleFile } from '../../src/vault/sharing/revisions.js';
import { fingerprintOf, formatFingerprint } from '../../src/vault/fingerprint.js';
import { cleanup, expectCode, tempRoot } from './vault-fixture.js';
import { befriend, person, read, threeMembers, write, type Person } from './sharing-people.js';

test.after.each(cleanup);

test('a member removed and added again reads on without a false divergence, and so does a member who missed both changes', async () => {
  const { alice, bob, carol } = await threeMembers();
  write(bob, 'team', 'B', 'bravo'); // version 2: Bob's last write is 2
  assert.is(read(carol, 'team').get('B'), 'bravo'); // Carol saw Bob's write
  unshareContainer(alice.dir, alice.key, 'team', [bob.pub]); // version 3, Bob out, a new key
  shareContainer(alice.dir, alice.key, 'team', [bob.pub]); // version 4, Bob back in
  assert.equal(
    [...read(bob, 'team')],
    [
      ['A', 'alpha'],
      ['B', 'bravo'],
    ],
    'Bob, back in, reads the current version',
  );
  assert.equal(
    [...read(carol, 'team')],
    [
      ['A', 'alpha'],
      ['B', 'bravo'],
    ],
    'Carol, who read neither change, reads it too',
  );
  const m = containerMembers(carol.dir, 'team');
  // Alice (owner, wrote 4), Carol (added in 1, never wrote), Bob (added again in 4).
  assert.equal(
    m.members.map((x) => x.lastWrite),
    [4, 1, 4],
    'Bob starts again at the version that added him, not at 0',
  );
  write(bob, 'team', 'C', 'charlie');
  assert.is(read(alice, 'team').get('C'), 'charlie');
});

test("a version that lacks a member's write is still a divergence when the owner added someone on the way", async () => {
  const { alice, bob, carol, file } = await threeMembers();
  const dave = await person();
  befriend(alice, dave, 'dave');
  const base = readFileSync(file);
  write(bob, 'team', 'B', 'bravo'); // version 2, Bob's first write
  read(carol, 'team'); // Carol saw it
  writeFileSync(file, base); // Alice never did: she works from version 1
  shareContainer(alice.dir, alice.key, 'team', [dave.pub]); // another version 2, a new recipient list
  write(alice, 'team', 'X', 'x-ray'); // version 3, without Bob's write
  expectCode(() => read(carol, 'team'), 'SHARE_DIVERGED', "Bob's write would be lost");
});

test('accept never takes an older recipient list back: a removed member could read what is written next', async () => {
  const { alice, bob, carol, file } = await threeMembers();
  const old = readFileSync(file); // version 1, recipient list 1: Alice, Bob, Carol
  unshareContainer(alice.dir, alice.key, 'team', [bob.pub]); // version 2, list 2, a new key Bob never had
  read(carol, 'team');
  const current = readFileSync(file);
  writeFileSync(file, old); // a stale checkout, or a storage host replaying it
  const refused = expectCode(() => read(carol, 'team'), 'SHARE_ROLLBACK');
  assert.match(refused.message, /recipient list \(epoch 1\) is older than the one this vault already saw \(epoch 2\)/);
  assert.not.match(refused.message, /stash container accept/, 'accept is not offered for an older list');
  for (const p of [carol, alice]) {
    const err = expectCode(() => acceptShared(p.dir, p.key, 'team'), 'SHARE_ROLLBACK', 'accept of an older list');
    assert.match(
      err.message,
      /on recipient list 1, older than list 2 that this vault already saw, so it cannot be accepted\. It names [0-9A-Z-]{29}, removed since/,
    );
  }
  expectCode(() => write(carol, 'team', 'NEW_SECRET', 'after the removal'), 'SHARE_ROLLBACK');
  assert.ok(readFileSync(file).equals(old), 'nothing was written on the old list');
  writeFileSync(file, current);
  write(carol, 'team', 'NEW_SECRET', 'after the removal');
  expectCode(() => read(bob, 'team'), 'SHARE_NOT_RECIPIENT', 'Bob cannot read it');
  // A rollback within one recipient list is still the reader's to accept on purpose.
  const v3 = readFileSync(file);
  write(alice, 'team', 'LATER', 'l');
  read(carol, 'team');
  writeFileSync(file, v3);
  assert.match(expectCode(() => read(carol, 'team'), 'SHARE_ROLLBACK').message, /run: stash container accept team/);
  assert.is(acceptShared(carol.dir, carol.key, 'team').revision, 3);
});

test("merge does not carry a removed member's write on the old list into the newer list", async () => {
  const { alice, bob, carol, file } = await threeMembers();
  const base = readFileSync(file);
  unshareContainer(alice.dir, alice.key, 'team', [carol.pub]); // version 2 on list 2, without Carol
  const newer = readFileSync(file);
  writeFileSync(file, base); // Bob has not pulled; Carol, removed, still has the old list and its key
  write(carol, 'team', 'DB_HOST', 'evil.example'); // another version 2, on list 1
  assert.is(read(bob, 'team').get('DB_HOST'), 'evil.example', 'Bob had not seen the removal (documented)');
  const carols = join(tempRoot(), 'carols.stash');
  copyFileSync(file, carols);
  writeFileSync(file, newer); // git pull
  expectCode(() => read(bob, 'team'), 'SHARE_DIVERGED');
  const err = expectCode(
    () => mergeShared(bob.dir, bob.key, 'team', carols),
    'SHARE_SIGNER_NOT_MEMBER',
    "merge of the removed member's version",
  );
  assert.match(
    err.message,
    /written by [0-9A-Z-]{29} on recipient list 1, who is not on the newer list 2 .*a member removed since/,
  );
  assert.ok(readFileSync(file).equals(newer), 'nothing was written');
  writeFileSync(file, readFileSync(carols)); // the other way round: Carol's version in place, the newer one in a file
  const theirs = join(tempRoot(), 'newer.stash');
  writeFileSync(theirs, newer);
  expectCode(
    () => mergeShared(bob.dir, bob.key, 'team', theirs),
    'SHARE_SIGNER_NOT_MEMBER',
    "Carol's version in place",
  );
  writeFileSync(file, newer);
  acceptShared(bob.dir, bob.key, 'team'); // the newer list is a later epoch: accept takes it
  assert.not.ok(read(bob, 'team').has('DB_HOST'));
  assert.not.ok(read(alice, 'team').has('DB_HOST'), 'the owner never sees it');
});

/**
 * A version of the file in place, as `writer` signs it with a client of their
 * own: its entries kept, its revision and every last write as given.
 */
function forgeNumbers(file: string, writer: Person, revision: number, lastWrite: number): Buffer {
  const current = readFileSync(file);
  const f = decodeShared(current, file);
  const key = openSharedContentKey(writer.dir, 'team', writer.secret);
  const entries = readSharedEntries(writer.dir, 'team', key);
  try {
    const write = {
      revision,
      writtenAt: Date.now(),
      writer: writer.pub.ed25519,
      lastWrites: f.membership.stanzas.map((s) => (s.ed25519.equals(writer.pub.ed25519) ? revision : lastWrite)),
      bodyNonce: randomBytes(24),
    };
    const bytes = assembleFile(
      current.subarray(0, f.membershipBytes.length + SIGNATURE_BYTES),
      f.membership.stanzas.length,
      write,
      key,
      entries,
      writer.secret.ed25519,
    );
    writeFileSync(file, bytes);
    return bytes;
  } finally {
    wipeEntries(entries);
    wipe(key);
  }
}

test('a signed version numbered 2^53-1 is refused naming its writer, and the owner can still remove that writer', async () => {
  const { alice, bob, carol, file } = await threeMembers();
  write(bob, 'team', 'B', 'bravo'); // version 2
  read(alice, 'team');
  read(carol, 'team');
  const bobFp = formatFingerprint(fingerprintOf(bob.pub.x25519, bob.pub.ed25519));
  const max = Number.MAX_SAFE_INTEGER;
  const frozen = forgeNumbers(file, bob, max, max); // every counter at the largest exact number
  for (const p of [alice, carol]) {
    const err = expectCode(() => read(p, 'team'), 'CONTAINER_CORRUPT', 'the maximum revision');
    assert.match(
      err.message,
      new RegExp(
        `version ${max} .*written by ${bobFp}.*no room for later versions.*stash container unshare team ${bobFp}`,
      ),
    );
    expectCode(() => write(p, 'team', 'X', 'x'), 'CONTAINER_CORRUPT', 'a write on top of it');
  }
  assert.ok(readFileSync(file).equals(frozen), 'nothing was written over it');
  expectCode(() => acceptShared(carol.dir, carol.key, 'team'), 'CONTAINER_CORRUPT', 'accept of the maximum revision');
  expectCode(
    () => unshareContainer(alice.dir, alice.key, 'team', [carol.pub]),
    'CONTAINER_CORRUPT',
    'removing someone else than its writer',
  );

  const r = unshareContainer(alice.dir, alice.key, 'team', [bob.pub]);
  assert.ok(r.revision < 2 ** 52, `a revision with room after it: ${r.revision}`);
  assert.equal(
    [...read(carol, 'team')],
    [
      ['A', 'alpha'],
      ['B', 'bravo'],
    ],
    "Carol takes the owner's version as a later one, entries kept",
  );
  write(carol, 'team', 'C', 'charlie');
  write(alice, 'team', 'D', 'delta');
  assert.equal(
    [...read(carol, 'team')].map(([k]) => k),
    ['A', 'B', 'C', 'D'],
  );
  expectCode(() => read(bob, 'team'), 'SHARE_NOT_RECIPIENT', 'Bob was removed');
  const m = containerMembers(alice.dir, 'team');
  assert.equal(m.members.length, 2);
  assert.ok(m.members.every((x) => x.lastWrite <= m.revision!));
});

test('last writes above the revision, and a jump far past the version seen, are refused naming the writer; the owner removes them', async () => {
  const { alice, bob, carol, file } = await threeMembers();
  const bobFp = formatFingerprint(fingerprintOf(bob.pub.x25519, bob.pub.ed25519));
  forgeNumbers(file, bob, 2, Number.MAX_SAFE_INTEGER); // revision 2, every other member's last write at the maximum
  for (const p of [alice, carol]) {
    assert.match(
      expectCode(() => read(p, 'team'), 'CONTAINER_CORRUPT', 'last writes above the revision').message,
      new RegExp(`written by ${bobFp}.*last write .* above the version itself`),
    );
  }
  unshareContainer(alice.dir, alice.key, 'team', [bob.pub]);
  assert.is(read(carol, 'team').get('A'), 'alpha');

  shareContainer(alice.dir, alice.key, 'team', [bob.pub]); // Bob back, and a jump of 2^40 from him
  read(carol, 'team');
  const seen = containerMembers(carol.dir, 'team').revision!;
  forgeNumbers(file, bob, seen + 2 ** 40, seen);
  const err = expectCode(() => read(carol, 'team'), 'CONTAINER_CORRUPT', 'a jump of 2^40');
  assert.match(err.message, new RegExp(`written by ${bobFp}.*${2 ** 40} past version ${seen}`));
  // Below the limit the file leaves room, so a member who knows why may still take it on purpose.
  assert.match(err.message, /stash container accept team/);
  unshareContainer(alice.dir, alice.key, 'team', [bob.pub]);
  write(carol, 'team', 'C', 'charlie');
  assert.is(read(alice, 'team').get('C'), 'charlie');
});

test.run();
