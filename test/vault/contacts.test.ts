import { readFileSync, rmSync, writeFileSync, copyFileSync } from 'node:fs';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import {
  addContact,
  fingerprintsEqual,
  getContact,
  identityPublic,
  listContacts,
  removeContact,
  vaultPaths,
} from '../../src/vault/index.js';
import { assertSameTree, cleanup, expectCode, newVault, snapshot } from './vault-fixture.js';

test.after.each(cleanup);

async function someone() {
  const v = await newVault();
  const pub = identityPublic(v.dir);
  return { x25519: pub.x25519, ed25519: pub.ed25519, fingerprint: pub.fingerprint };
}

test('add, list, get and remove contacts', async () => {
  const v = await newVault();
  const bob = await someone();
  const carol = await someone();
  assert.equal(listContacts(v.dir, v.key), []);
  const added = addContact(v.dir, v.key, {
    name: ' Bob ',
    email: 'bob@example.com',
    x25519: bob.x25519,
    ed25519: bob.ed25519,
  });
  assert.is(added.name, 'Bob');
  assert.is(added.fingerprint, bob.fingerprint);
  assert.ok(Math.abs(Date.parse(added.addedAt) - Date.now()) < 60_000);
  addContact(v.dir, v.key, {
    name: 'Carol Ünicode',
    email: 'carol@example.org',
    x25519: carol.x25519,
    ed25519: carol.ed25519,
  });
  const all = listContacts(v.dir, v.key);
  assert.equal(
    all.map((c) => c.name),
    ['Bob', 'Carol Ünicode'],
  );
  assert.equal(all[0], added);
  const got = getContact(v.dir, v.key, 'BOB');
  assert.ok(got.x25519.equals(bob.x25519) && got.ed25519.equals(bob.ed25519));
  assert.ok(fingerprintsEqual(got.fingerprintBytes, bob.fingerprint));
  assert.is(got.email, 'bob@example.com');
  assert.ok(removeContact(v.dir, v.key, 'bob'));
  assert.not.ok(removeContact(v.dir, v.key, 'bob'));
  expectCode(() => getContact(v.dir, v.key, 'Bob'), 'CONTACT_NOT_FOUND');
  assert.equal(
    listContacts(v.dir, v.key).map((c) => c.name),
    ['Carol Ünicode'],
  );
});

test('the same name (any case) or the same key cannot be added twice', async () => {
  const v = await newVault();
  const bob = await someone();
  const eve = await someone();
  addContact(v.dir, v.key, { name: 'Bob', email: 'bob@example.com', ...bob });
  const before = snapshot(v.dir);
  expectCode(() => addContact(v.dir, v.key, { name: 'bOB', email: 'x@example.com', ...eve }), 'CONTACT_EXISTS');
  assert.match(
    expectCode(() => addContact(v.dir, v.key, { name: 'Robert', email: 'bob@example.com', ...bob }), 'CONTACT_EXISTS')
      .message,
    /"Bob"/,
  );
  assertSameTree(before, snapshot(v.dir), 'refused adds');
});

test('names, emails and keys are validated', async () => {
  const v = await newVault();
  const bob = await someone();
  const before = snapshot(v.dir);
  for (const name of ['', '   ', 'x'.repeat(65), 'Bob\u202Eevil', 'Bob\nSmith', 'Bob\u0000', 'Bob\u200B']) {
    expectCode(
      () => addContact(v.dir, v.key, { name, email: 'a@b.c', ...bob }),
      'INVALID_CONTACT',
      JSON.stringify(name),
    );
  }
  for (const email of ['', 'bob', 'bob@', '@b', 'a b@c.d', `${'a'.repeat(250)}@b.cd`]) {
    expectCode(
      () => addContact(v.dir, v.key, { name: 'Bob', email, ...bob }),
      'INVALID_CONTACT',
      JSON.stringify(email),
    );
  }
  expectCode(
    () => addContact(v.dir, v.key, { name: 'Bob', email: 'a@b.c', x25519: Buffer.alloc(32), ed25519: bob.ed25519 }),
    'BAD_PUBLIC_KEY',
  );
  expectCode(
    () => addContact(v.dir, v.key, { name: 'Bob', email: 'a@b.c', x25519: bob.x25519, ed25519: Buffer.alloc(31) }),
    'BAD_PUBLIC_KEY',
  );
  assertSameTree(before, snapshot(v.dir), 'refused adds');
});

test('a foreign vault key neither reads nor writes contacts', async () => {
  const v = await newVault();
  const other = await newVault();
  const bob = await someone();
  expectCode(() => listContacts(v.dir, other.key), 'VAULT_KEY_MISMATCH');
  expectCode(() => addContact(v.dir, other.key, { name: 'Bob', email: 'a@b.c', ...bob }), 'VAULT_KEY_MISMATCH');
});

test('any changed byte of the contacts file is detected, and nothing is rewritten', async () => {
  const v = await newVault();
  const bob = await someone();
  addContact(v.dir, v.key, { name: 'Bob', email: 'bob@example.com', ...bob });
  const path = vaultPaths(v.dir).contacts;
  const good = readFileSync(path);
  for (let i = 0; i < good.length; i++) {
    const bad = Buffer.from(good);
    bad[i]! ^= 0x01;
    writeFileSync(path, bad);
    const e = expectCode(() => listContacts(v.dir, v.key), 'VAULT_CORRUPT', `byte ${i}`);
    assert.ok(e.message.includes(path), 'the message names the file');
    expectCode(() => addContact(v.dir, v.key, { name: 'Eve', email: 'e@x.y', ...bob }), 'VAULT_CORRUPT');
    assert.ok(readFileSync(path).equals(bad), 'a failed add does not rewrite the file');
  }
  for (const len of [0, 10, 49, 50, 65, good.length - 1]) {
    writeFileSync(path, good.subarray(0, len));
    expectCode(() => listContacts(v.dir, v.key), 'VAULT_CORRUPT', `truncated to ${len}`);
  }
  rmSync(path);
  expectCode(() => listContacts(v.dir, v.key), 'VAULT_CORRUPT', 'deleted');
  writeFileSync(path, good);
  assert.is(listContacts(v.dir, v.key).length, 1);
});

test("another vault's contacts file is refused", async () => {
  const v = await newVault();
  const other = await newVault();
  copyFileSync(vaultPaths(other.dir).contacts, vaultPaths(v.dir).contacts);
  assert.match(expectCode(() => listContacts(v.dir, v.key), 'VAULT_CORRUPT').message, /different vault/);
});

test.run();
