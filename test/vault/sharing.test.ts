/**
 * Shared containers through the library, with real vaults (Alice the owner,
 * Bob a recipient, Carol an outsider) and real files: conversion from a
 * private container keeps its id and key; a linked file is read and written
 * by both; every refusal has its own code (bad signature, unsigned recipient
 * list, non-member signer, rollback, divergence, not a recipient, untrusted
 * owner); unshare rotates the key and leaves old copies readable.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { copyFileSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  addContact,
  containerInfo,
  createContainer,
  identityPublic,
  identitySecret,
  listContainers,
  readEntries,
  removeContainer,
  unwrapContentKey,
  wipe,
  wipeEntries,
  writeEntry,
  type IdentitySecret,
} from '../../src/vault/index.js';
import {
  acceptShared,
  containerMembers,
  exportShared,
  importShared,
  linkShared,
  mergeShared,
  openSharedContentKey,
  readSharedEntries,
  shareContainer,
  unshareContainer,
  updateSharedEntries,
} from '../../src/vault/sharing/index.js';
import { sealKey, signWrite } from '../../src/vault/sharing/crypto.js';
import { decodeShared, headerLength, SIGNATURE_BYTES, STANZA_BYTES } from '../../src/vault/sharing/format.js';
import { writeIfUnchanged } from '../../src/vault/sharing/revisions.js';
import { diverge } from './sharing-people.js';
import { cleanup, expectCode, newVault, tempRoot, type TestVault } from './vault-fixture.js';

test.after.each(cleanup);

interface Person extends TestVault {
  pub: { x25519: Buffer; ed25519: Buffer };
  secret: IdentitySecret;
}

async function person(): Promise<Person> {
  const v = await newVault();
  const p = identityPublic(v.dir, v.key);
  return { ...v, pub: { x25519: p.x25519, ed25519: p.ed25519 }, secret: identitySecret(v.dir, v.key) };
}

function befriend(a: Person, b: Person, name: string): void {
  addContact(a.dir, a.key, { name, email: `${name}@example.test`, ...b.pub });
}

const text = (e: Map<string, Buffer>, k: string) => e.get(k)?.toString();

function read(p: Person, name: string): Map<string, string> {
  const key = openSharedContentKey(p.dir, name, p.secret);
  try {
    const e = readSharedEntries(p.dir, name, key);
    const out = new Map([...e].map(([k, v]) => [k, v.toString()]));
    wipeEntries(e);
    return out;
  } finally {
    wipe(key);
  }
}

function write(p: Person, name: string, entry: string, value: string): void {
  const key = openSharedContentKey(p.dir, name, p.secret);
  try {
    updateSharedEntries(p.dir, name, key, new Map([[entry, Buffer.from(value)]]), p.secret);
  } finally {
    wipe(key);
  }
}

/** Alice owns `team` (A=alpha), shared with Bob, exported to a folder and linked there by both. */
async function teamSetup(): Promise<{ alice: Person; bob: Person; carol: Person; file: string }> {
  const [alice, bob, carol] = [await person(), await person(), await person()];
  befriend(alice, bob, 'bob');
  befriend(bob, alice, 'alice');
  createContainer(alice.dir, alice.key, 'team');
  const ck = unwrapContentKey(alice.dir, alice.key, 'team');
  writeEntry(alice.dir, 'team', ck, 'A', Buffer.from('alpha'));
  wipe(ck);
  shareContainer(alice.dir, alice.key, 'team', [bob.pub]);
  const file = join(tempRoot(), 'team.stash');
  exportShared(alice.dir, 'team', file);
  assert.is(linkShared(alice.dir, alice.key, file, 'team').outcome, 'replaced-copy');
  linkShared(bob.dir, bob.key, file, 'team');
  return { alice, bob, carol, file };
}

test('sharing a private container converts it in place: same id, same content key, entries kept', async () => {
  const [alice, bob] = [await person(), await person()];
  befriend(alice, bob, 'bob');
  const c = createContainer(alice.dir, alice.key, 'team');
  const v1Key = unwrapContentKey(alice.dir, alice.key, 'team');
  writeEntry(alice.dir, 'team', v1Key, 'TOKEN', Buffer.from('t0k'));
  const before = readFileSync(c.path);
  assert.is(before.readUInt16LE(8), 1);
  const r = shareContainer(alice.dir, alice.key, 'team', [bob.pub]);
  assert.equal([r.converted, r.revision, r.epoch, r.changed.length], [true, 1, 1, 1]);
  const after = readFileSync(c.path);
  assert.is(after.readUInt16LE(8), 2, 'format version 2');
  const info = containerInfo(alice.dir, 'team');
  assert.equal([info.id, info.shared, info.link], [c.id, true, null]);
  const key = openSharedContentKey(alice.dir, 'team', alice.secret);
  assert.ok(key.equals(v1Key), 'the content key did not change, so a key cached in the agent stays valid');
  assert.ok((key as Buffer & { secure?: boolean }).secure, 'the key is in secure memory');
  const e = readSharedEntries(alice.dir, 'team', key);
  assert.is(text(e, 'TOKEN'), 't0k');
  wipeEntries(e);
  // The old reader path refuses it cleanly, and a second share of the same contact changes nothing.
  expectCode(() => readEntries(alice.dir, 'team', v1Key), 'CONTAINER_CORRUPT');
  const again = shareContainer(alice.dir, alice.key, 'team', [bob.pub]);
  assert.equal([again.changed.length, again.unchanged.length, again.revision], [0, 1, 1]);
  assert.ok(readFileSync(c.path).equals(after), 'nothing written');
  const listed = listContainers(alice.dir);
  assert.equal(
    listed.map((x) => [x.name, x.shared, x.members, x.problem]),
    [['team', true, 2, null]],
  );
});

test('private containers are untouched: version 1, no record, members = the owner alone', async () => {
  const alice = await person();
  const c = createContainer(alice.dir, alice.key, 'solo');
  assert.is(readFileSync(c.path).readUInt16LE(8), 1);
  assert.equal([containerInfo(alice.dir, 'solo').shared, listContainers(alice.dir)[0]!.members], [false, null]);
  const m = containerMembers(alice.dir, 'solo');
  assert.equal(
    [m.shared, m.members.length, m.members[0]!.owner, m.members[0]!.you, m.writer],
    [false, 1, true, true, null],
  );
  expectCode(() => exportShared(alice.dir, 'solo', join(alice.root, 'x.stash')), 'SHARE_NOT_SHARED');
  const bob = await person();
  const err = expectCode(
    () => linkShared(bob.dir, bob.key, c.path, 'solo'),
    'SHARE_NOT_SHARED',
    'a private container file elsewhere',
  );
  assert.match(err.message, /is a private container of one vault/);
  writeFileSync(join(bob.root, 'notes.txt'), 'hello');
  assert.match(
    expectCode(() => importShared(bob.dir, bob.key, join(bob.root, 'notes.txt')), 'CONTAINER_CORRUPT').message,
    /is not a stash container file/,
  );
  expectCode(() => unshareContainer(alice.dir, alice.key, 'solo', []), 'SHARE_NOT_SHARED');
});

test('a linked file: Bob reads with his own identity, writes; Alice reads it and sees Bob as the writer', async () => {
  const { alice, bob, file } = await teamSetup();
  assert.equal(containerInfo(bob.dir, 'team').link, file);
  assert.is(read(bob, 'team').get('A'), 'alpha');
  write(bob, 'team', 'B', 'bravo');
  assert.equal(
    [...read(alice, 'team')],
    [
      ['A', 'alpha'],
      ['B', 'bravo'],
    ],
  );
  const m = containerMembers(alice.dir, 'team');
  assert.equal([m.shared, m.revision, m.epoch, m.link], [true, 2, 1, file]);
  assert.ok(m.writer!.ed25519.equals(bob.pub.ed25519), 'Bob signed the current revision');
  assert.equal(
    m.members.map((x) => [x.owner, x.you, x.lastWrite]),
    [
      [true, true, 1],
      [false, false, 2],
    ],
  );
  // The vault copy was replaced by the link: one container, at the linked path.
  assert.equal(
    listContainers(alice.dir).map((x) => [x.name, x.link, x.problem]),
    [['team', file, null]],
  );
});

test('Carol, not a recipient, cannot take the file in; a file re-signed by Carol is refused', async () => {
  const { alice, bob, carol, file } = await teamSetup();
  befriend(carol, alice, 'alice');
  expectCode(() => linkShared(carol.dir, carol.key, file, 'team'), 'SHARE_NOT_RECIPIENT');
  expectCode(() => importShared(carol.dir, carol.key, file, 'team'), 'SHARE_NOT_RECIPIENT');
  const bytes = readFileSync(file);
  const f = decodeShared(bytes, file);
  const w = headerLength(f.membership.stanzas.length) - 72 - 8 * f.membership.stanzas.length;
  const forged = Buffer.from(bytes);
  carol.pub.ed25519.copy(forged, w + 16); // the writer field
  const signed = forged.subarray(0, forged.length - SIGNATURE_BYTES);
  signWrite(signed, carol.secret.ed25519).copy(forged, forged.length - SIGNATURE_BYTES);
  writeFileSync(file, forged);
  expectCode(() => read(alice, 'team'), 'SHARE_SIGNER_NOT_MEMBER');
  expectCode(() => read(bob, 'team'), 'SHARE_SIGNER_NOT_MEMBER');
});

test('tampering: recipient list, sealed keys, truncation, a flipped body byte each refused with its code', async () => {
  const { alice, bob, carol, file } = await teamSetup();
  const good = readFileSync(file);
  const r = decodeShared(good, file).membership.stanzas.length;
  const restore = () => writeFileSync(file, good);
  const tamper = (change: (b: Buffer) => Buffer, code: string, what: string) => {
    writeFileSync(file, change(Buffer.from(good)));
    expectCode(() => read(alice, 'team'), code, `${what} (Alice)`);
    expectCode(() => read(bob, 'team'), code, `${what} (Bob)`);
    restore();
  };
  // Bob's stanza replaced by Carol's keys with the key sealed to her.
  const key = openSharedContentKey(alice.dir, 'team', alice.secret);
  tamper(
    (b) => {
      const o = 63 + STANZA_BYTES;
      carol.pub.x25519.copy(b, o);
      carol.pub.ed25519.copy(b, o + 32);
      sealKey(key, carol.pub.x25519).copy(b, o + 64);
      return b;
    },
    'SHARE_MEMBERSHIP_INVALID',
    'recipient list changed',
  );
  // The same change, re-signed by Bob as the writer: still not the owner's list.
  tamper(
    (b) => {
      const o = 63 + STANZA_BYTES;
      carol.pub.x25519.copy(b, o);
      sealKey(key, carol.pub.x25519).copy(b, o + 64);
      signWrite(b.subarray(0, b.length - 64), bob.secret.ed25519).copy(b, b.length - 64);
      return b;
    },
    'SHARE_MEMBERSHIP_INVALID',
    'recipient list changed and re-signed by a member',
  );
  wipe(key);
  tamper(
    (b) => {
      const a = Buffer.from(b.subarray(63 + 64, 63 + 144));
      b.subarray(63 + STANZA_BYTES + 64, 63 + STANZA_BYTES + 144).copy(b, 63 + 64);
      a.copy(b, 63 + STANZA_BYTES + 64);
      return b;
    },
    'SHARE_MEMBERSHIP_INVALID',
    'sealed keys swapped',
  );
  tamper((b) => b.subarray(0, b.length - 100), 'SHARE_BAD_SIGNATURE', 'truncated body');
  tamper((b) => b.subarray(0, headerLength(r) - 10), 'CONTAINER_CORRUPT', 'truncated inside the header');
  tamper(
    (b) => {
      b[headerLength(r) + 5]! ^= 1;
      return b;
    },
    'SHARE_BAD_SIGNATURE',
    'a body byte flipped',
  );
  tamper((b) => Buffer.concat([b, Buffer.from('x')]), 'SHARE_BAD_SIGNATURE', 'a byte appended');
  assert.is(read(alice, 'team').get('A'), 'alpha', 'the restored file opens');
});

test('rollback: an older revision replayed over a newer one is refused; accept takes it on purpose', async () => {
  const { alice, bob, file } = await teamSetup();
  const old = readFileSync(file);
  write(bob, 'team', 'B', 'bravo');
  read(alice, 'team');
  writeFileSync(file, old);
  const err = expectCode(() => read(alice, 'team'), 'SHARE_ROLLBACK');
  assert.match(err.message, /holds version 1 .*already saw version 2 /);
  expectCode(() => read(bob, 'team'), 'SHARE_ROLLBACK');
  expectCode(() => write(bob, 'team', 'C', 'charlie'), 'SHARE_ROLLBACK');
  assert.ok(readFileSync(file).equals(old), 'the refused write changed nothing');
  const accepted = acceptShared(alice.dir, alice.key, 'team');
  assert.equal([accepted.revision, accepted.previous!.revision], [1, 2]);
  assert.equal([...read(alice, 'team')], [['A', 'alpha']]);
});

test('divergence: two members writing from the same base are never silently merged or lost', async () => {
  const { alice, bob, file } = await teamSetup();
  const base = readFileSync(file);
  write(alice, 'team', 'FROM_ALICE', '1'); // revision 3 by Alice
  const aliceVersion = readFileSync(file);
  writeFileSync(file, base);
  write(bob, 'team', 'FROM_BOB', '1'); // another revision 3, by Bob (he never saw Alice's)
  expectCode(() => read(alice, 'team'), 'SHARE_DIVERGED', 'same revision number, other content');
  write(bob, 'team', 'MORE', '2'); // revision 4 on Bob's branch
  const err = expectCode(() => read(alice, 'team'), 'SHARE_DIVERGED', "a later revision that lacks Alice's write");
  assert.match(err.message, /nothing is lost yet/);
  // And the other way round: Bob, who saw his own revision 4, refuses Alice's branch.
  const bobVersion = readFileSync(file);
  writeFileSync(file, aliceVersion);
  expectCode(() => read(bob, 'team'), 'SHARE_DIVERGED');
  expectCode(() => write(bob, 'team', 'X', 'y'), 'SHARE_DIVERGED');
  writeFileSync(file, bobVersion);
  acceptShared(alice.dir, alice.key, 'team');
  assert.equal([...read(alice, 'team').keys()], ['A', 'FROM_BOB', 'MORE']);
});

test('merge: two diverged versions become one that both members accept; conflicts need a side', async () => {
  const { alice, bob, file } = await teamSetup();
  // Alice's side is in place; Bob's is in another file.
  const bobs = diverge(
    file,
    () => write(alice, 'team', 'FROM_ALICE', '1'),
    () => write(bob, 'team', 'FROM_BOB', '2'),
  );
  expectCode(() => read(bob, 'team'), 'SHARE_DIVERGED');
  await new Promise((r) => setTimeout(r, 20));
  const mergedAt = Date.now();
  const r = mergeShared(alice.dir, alice.key, 'team', bobs);
  assert.equal([r.outcome, r.revision, r.fromOther, r.conflicts], ['merged', 3, ['FROM_BOB'], []]);
  const { changeTime } = await import('../../src/vault/container-body.js');
  const key = openSharedContentKey(alice.dir, 'team', alice.secret);
  const e = readSharedEntries(alice.dir, 'team', key);
  const times = ['A', 'FROM_ALICE', 'FROM_BOB'].map((n) => changeTime(e, n));
  assert.ok(
    times.every((t) => t > 0 && t < mergedAt),
    `each entry keeps the change time of its side, not the merge's: ${times}`,
  );
  wipeEntries(e);
  wipe(key);
  assert.equal(
    [...read(alice, 'team')],
    [
      ['A', 'alpha'],
      ['FROM_ALICE', '1'],
      ['FROM_BOB', '2'],
    ],
  );
  assert.equal(
    [...read(bob, 'team')],
    [
      ['A', 'alpha'],
      ['FROM_ALICE', '1'],
      ['FROM_BOB', '2'],
    ],
    'Bob accepts the merge as a later version, no accept needed',
  );
  const m = containerMembers(bob.dir, 'team');
  assert.equal(
    m.members.map((x) => x.lastWrite),
    [3, 2],
    "Alice merged (3); Bob's write (2) is carried",
  );
  // Merging again, or an older file, changes nothing; a later one is taken as it is.
  assert.is(mergeShared(alice.dir, alice.key, 'team', bobs).outcome, 'unchanged');
  const merged = readFileSync(file);
  write(bob, 'team', 'LATER', '4');
  const later = join(tempRoot(), 'later.stash');
  copyFileSync(file, later);
  writeFileSync(file, merged);
  assert.equal(
    [mergeShared(alice.dir, alice.key, 'team', later).outcome, readFileSync(file).equals(readFileSync(later))],
    ['fast-forward', true],
  );

  // Both change A: refused without a side, and no byte written; --prefer picks one.
  const bobsA = diverge(
    file,
    () => write(alice, 'team', 'A', 'alice-says'),
    () => write(bob, 'team', 'A', 'bob-says'),
  );
  const alicesA = readFileSync(file);
  const err = expectCode(() => mergeShared(alice.dir, alice.key, 'team', bobsA), 'SHARE_DIVERGED');
  assert.match(err.message, /both versions changed A; nothing was written/);
  assert.not.match(err.message, /says/, 'no value in the message');
  assert.ok(readFileSync(file).equals(alicesA));
  assert.equal(mergeShared(alice.dir, alice.key, 'team', bobsA, 'file').conflicts, ['A']);
  assert.is(read(alice, 'team').get('A'), 'bob-says');
  assert.is(read(bob, 'team').get('A'), 'bob-says');
});

test("merge across a membership change: the newer recipient list and its key win, the other side's writes are kept", async () => {
  const { alice, bob, carol, file } = await teamSetup();
  befriend(alice, carol, 'carol');
  befriend(carol, alice, 'alice');
  const base = readFileSync(file);
  shareContainer(alice.dir, alice.key, 'team', [carol.pub]); // version 2, recipient list epoch 2
  const alices = join(tempRoot(), 'alices.stash');
  copyFileSync(file, alices);
  writeFileSync(file, base);
  write(bob, 'team', 'FROM_BOB', 'b'); // another version 2, on the epoch 1 list
  const r = mergeShared(bob.dir, bob.key, 'team', alices);
  assert.equal([r.outcome, r.revision, r.fromOther], ['merged', 3, []]);
  const merged = decodeShared(readFileSync(file), file);
  assert.equal(
    [merged.membership.epoch, merged.membership.stanzas.length],
    [2, 3],
    "Alice's list (with Carol), as she signed it",
  );
  assert.is(read(alice, 'team').get('FROM_BOB'), 'b', 'Alice accepts it as a later version');
  linkShared(carol.dir, carol.key, file, 'team');
  assert.is(read(carol, 'team').get('FROM_BOB'), 'b', "Carol, added on the other side, reads Bob's write");
});

test('unshare: the key is rotated, Bob is out of the new revision, his old copy still opens', async () => {
  const { alice, bob, file } = await teamSetup();
  // Bob works from his own checkout of the team's repository.
  const bobFile = join(tempRoot(), 'team.stash');
  copyFileSync(file, bobFile);
  removeContainer(bob.dir, 'team');
  linkShared(bob.dir, bob.key, bobFile, 'team');
  const before = readFileSync(file);
  const oldKey = openSharedContentKey(alice.dir, 'team', alice.secret);
  const r = unshareContainer(alice.dir, alice.key, 'team', [bob.pub]);
  assert.equal([r.revision, r.epoch, r.changed.length], [2, 2, 1]);
  const newKey = openSharedContentKey(alice.dir, 'team', alice.secret);
  assert.not.ok(newKey.equals(oldKey), 'a new content key');
  assert.not.ok(
    decodeShared(readFileSync(file), file).membership.commitment.equals(
      decodeShared(before, file).membership.commitment,
    ),
    'a new key commitment',
  );
  expectCode(
    () => readSharedEntries(alice.dir, 'team', oldKey),
    'CONTENT_KEY_MISMATCH',
    'the old key does not open the new revision',
  );
  assert.equal([...read(alice, 'team')], [['A', 'alpha']]);
  assert.equal([...read(bob, 'team')], [['A', 'alpha']], "Bob's checkout, not pulled yet, still opens");
  copyFileSync(file, bobFile); // git pull
  expectCode(() => read(bob, 'team'), 'SHARE_NOT_RECIPIENT', 'Bob and the new revision');
  writeFileSync(bobFile, before); // git checkout HEAD~1 -- team.stash
  assert.equal([...read(bob, 'team')], [['A', 'alpha']], 'Bob keeps what he had: the old revision still opens');
  // A write by Bob on the old recipient list, pushed to Alice, is refused: she saw the newer list.
  write(bob, 'team', 'SNEAKY', '1');
  copyFileSync(bobFile, file);
  const err = expectCode(() => read(alice, 'team'), 'SHARE_ROLLBACK');
  assert.match(err.message, /recipient list \(epoch 1\) is older/);
  wipe(oldKey);
  wipe(newKey);
});

test('only the owner changes members; an owner who is not a contact is not trusted', async () => {
  const { alice, bob, carol, file } = await teamSetup();
  befriend(bob, carol, 'carol');
  expectCode(() => shareContainer(bob.dir, bob.key, 'team', [carol.pub]), 'SHARE_NOT_OWNER');
  expectCode(() => unshareContainer(bob.dir, bob.key, 'team', [alice.pub]), 'SHARE_NOT_OWNER');
  expectCode(() => unshareContainer(alice.dir, alice.key, 'team', [alice.pub]), 'INVALID_ARGUMENT');
  expectCode(() => unshareContainer(alice.dir, alice.key, 'team', [carol.pub]), 'SHARE_NOT_MEMBER');
  // Carol shares her own container with Bob, but Bob never added Carol... he did; Dave has not.
  const dave = await person();
  befriend(carol, dave, 'dave');
  createContainer(carol.dir, carol.key, 'carols');
  shareContainer(carol.dir, carol.key, 'carols', [dave.pub]);
  const out = join(tempRoot(), 'carols.stash');
  exportShared(carol.dir, 'carols', out);
  expectCode(() => importShared(dave.dir, dave.key, out), 'SHARE_UNTRUSTED_OWNER');
  befriend(dave, carol, 'carol');
  assert.is(importShared(dave.dir, dave.key, out).name, 'carols');
  // Names are checked: the same container cannot be taken in twice.
  expectCode(() => importShared(dave.dir, dave.key, out, 'again'), 'CONTAINER_EXISTS');
  expectCode(() => linkShared(bob.dir, bob.key, file, 'other'), 'CONTAINER_EXISTS');
});

test('export refuses to overwrite a newer or diverged file; import updates a copy forward only', async () => {
  const { alice, bob, file } = await teamSetup();
  const elsewhere = join(tempRoot(), 'copy.stash');
  exportShared(alice.dir, 'team', elsewhere);
  assert.is(exportShared(alice.dir, 'team', elsewhere).outcome, 'unchanged');
  write(bob, 'team', 'B', 'bravo');
  assert.is(exportShared(alice.dir, 'team', elsewhere).outcome, 'updated', 'an older copy is brought forward');
  removeContainer(bob.dir, 'team'); // unlink (the file stays), so Bob can take a copy in instead
  assert.ok(readFileSync(file).length > 0, 'unlinking kept the file');
  importShared(bob.dir, bob.key, elsewhere, 'mirror');
  write(alice, 'team', 'C', 'charlie');
  const newer = join(tempRoot(), 'newer.stash');
  exportShared(alice.dir, 'team', newer);
  assert.is(importShared(bob.dir, bob.key, newer, 'mirror').outcome, 'updated');
  expectCode(() => importShared(bob.dir, bob.key, elsewhere, 'mirror'), 'SHARE_ROLLBACK');
  expectCode(() => exportShared(bob.dir, 'mirror', join(alice.root, 'vault', 'vault.json')), 'CONTAINER_EXISTS');
  removeContainer(bob.dir, 'mirror');
  assert.equal(listContainers(bob.dir), []);
});

test('history relations: one number with two contents is neither contained nor newer (one identity on two machines)', async () => {
  const { covers, relate } = await import('../../src/vault/sharing/history.js');
  const seen = (revision: number, hash: number, writes: Record<string, number>, epoch = 1) => ({
    revision,
    epoch,
    hash: Buffer.alloc(32, hash),
    lastWrites: new Map(Object.entries(writes)),
    writer: 'a',
    writtenAt: 0,
  });
  const x = seen(3, 1, { a: 3, b: 1 });
  const y = seen(3, 2, { a: 3, b: 1 });
  assert.equal([covers(x, y), covers(y, x), relate(x, y)], [false, false, 'diverged']);
  assert.equal([covers(x, x), relate(x, x)], [true, 'same']);
  const later = seen(4, 3, { a: 3, b: 4 });
  assert.equal(
    [covers(later, x), covers(x, later), relate(x, later), relate(later, x)],
    [true, false, 'newer', 'rollback'],
  );
  const fork = seen(4, 4, { a: 2, b: 4 });
  assert.equal(
    [covers(fork, x), relate(x, fork), relate(x, seen(5, 5, { a: 3, b: 1 }, 0))],
    [false, 'diverged', 'rollback'],
  );
});

test('compare-and-swap: a file changed between read and rename is not overwritten', async () => {
  const root = tempRoot();
  const path = join(root, 'f');
  writeFileSync(path, 'one');
  const { fileHash } = await import('../../src/vault/sharing/crypto.js');
  const expected = fileHash(Buffer.from('one'));
  writeFileSync(path, 'two');
  expectCode(() => writeIfUnchanged(path, Buffer.from('three'), expected), 'SHARE_CHANGED');
  assert.is(readFileSync(path, 'utf8'), 'two');
  expectCode(() => writeIfUnchanged(path, Buffer.from('three'), null), 'SHARE_CHANGED', 'must not exist');
  writeIfUnchanged(path, Buffer.from('three'), fileHash(Buffer.from('two')));
  assert.is(readFileSync(path, 'utf8'), 'three');
});

test.run();
