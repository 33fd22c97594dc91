/**
 * A key a contact retired by a rotation is never trusted again
 * (src/vault/contacts.ts retiredKeyError): not as a new contact, not as the
 * new key of a statement, not even one half of it. Real vaults, no mocks.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { addContact, listContacts, VaultError } from '../../src/vault/index.js';
import { generateKeyPairs, wipeKeyPairs, type KeyPairs } from '../../src/vault/identity.js';
import { acceptRotation, makeStatement } from '../../src/vault/rotation/index.js';
import { cleanup, newVault, type TestVault } from './vault-fixture.js';

test.after.each(cleanup);

const pub = (k: KeyPairs) => ({ x25519: k.x25519, ed25519: k.ed25519 });

function retired(fn: () => unknown): void {
  try {
    fn();
  } catch (err) {
    assert.instance(err, VaultError);
    assert.is((err as VaultError).code, 'KEY_RETIRED', (err as Error).message);
    assert.match((err as Error).message, /retired by contact "alice" on \d{4}-\d\d-\d\d/);
    return;
  }
  assert.unreachable('the retired key was trusted again');
}

/** A vault whose contact alice rotated from k1 to k2 (accepted). */
async function rotated(): Promise<{ v: TestVault; k1: KeyPairs; k2: KeyPairs }> {
  const v = await newVault();
  const [k1, k2] = [generateKeyPairs(), generateKeyPairs()];
  addContact(v.dir, v.key, { name: 'alice', email: 'alice@example.test', ...pub(k1) });
  acceptRotation(v.dir, v.key, makeStatement(k1, k2, k1.secret.ed25519, k2.secret.ed25519));
  return { v, k1, k2 };
}

test('a retired key, or either half of it, is refused as a new contact', async () => {
  const { v, k1, k2 } = await rotated();
  const fresh = generateKeyPairs();
  const before = readFileSync(join(v.dir, 'contacts.stash'));
  retired(() => addContact(v.dir, v.key, { name: 'mallory', email: 'm@example.test', ...pub(k1) }));
  retired(() =>
    addContact(v.dir, v.key, { name: 'm2', email: 'm@example.test', x25519: fresh.x25519, ed25519: k1.ed25519 }),
  );
  retired(() =>
    addContact(v.dir, v.key, { name: 'm3', email: 'm@example.test', x25519: k1.x25519, ed25519: fresh.ed25519 }),
  );
  assert.ok(readFileSync(join(v.dir, 'contacts.stash')).equals(before), 'nothing was written');
  // A key never retired is still welcome.
  addContact(v.dir, v.key, { name: 'carol', email: 'c@example.test', ...pub(fresh) });
  assert.equal(
    listContacts(v.dir, v.key).map((c) => c.name),
    ['alice', 'carol'],
  );
  for (const k of [k1, k2, fresh]) wipeKeyPairs(k);
});

test("a statement whose new key is a retired key is refused, the contact's own rotation back or another's", async () => {
  const { v, k1, k2 } = await rotated();
  const b1 = generateKeyPairs();
  addContact(v.dir, v.key, { name: 'bob', email: 'bob@example.test', ...pub(b1) });
  const before = readFileSync(join(v.dir, 'contacts.stash'));
  // Alice "rotating back" to the key she retired.
  retired(() => acceptRotation(v.dir, v.key, makeStatement(k2, k1, k2.secret.ed25519, k1.secret.ed25519)));
  // Bob's key handed over to alice's retired key, by whoever holds both.
  retired(() => acceptRotation(v.dir, v.key, makeStatement(b1, k1, b1.secret.ed25519, k1.secret.ed25519)));
  assert.ok(readFileSync(join(v.dir, 'contacts.stash')).equals(before), 'nothing was written');
  const contacts = listContacts(v.dir, v.key);
  assert.ok(contacts.find((c) => c.name === 'alice')!.ed25519.equals(k2.ed25519));
  assert.ok(contacts.find((c) => c.name === 'bob')!.ed25519.equals(b1.ed25519));
  for (const k of [k1, k2, b1]) wipeKeyPairs(k);
});

test.run();
