/**
 * Finishing an interrupted identity rotation (src/vault/rotation/rotate.ts)
 * from the states a crash really leaves on disk: real vaults, real files.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createContainer, identityPublic, identitySecret, wipe, type VaultError } from '../../src/vault/index.js';
import { loadSodium } from '../../src/native/sodium.js';
import { recordPath } from '../../src/vault/sharing/records.js';
import { exportShared, linkShared, shareContainer } from '../../src/vault/sharing/index.js';
import { rotateIdentity } from '../../src/vault/rotation/index.js';
import { read, threeMembers } from './sharing-people.js';
import { cleanup, tempRoot } from './vault-fixture.js';

test.after.each(cleanup);

/**
 * Alice owns `team` (linked) and `other` (linked, its file moved away), both
 * shared with Bob; her first rotate re-seals team, fails on other and keeps
 * the old keys in identity.json's retiring block. `oldRecord`: team's record
 * before the rotate.
 */
async function halfRotated() {
  const { alice, bob } = await threeMembers();
  createContainer(alice.dir, alice.key, 'other');
  shareContainer(alice.dir, alice.key, 'other', [bob.pub]);
  const other = join(tempRoot(), 'other.stash');
  exportShared(alice.dir, 'other', other);
  linkShared(alice.dir, alice.key, other, 'other');
  const aside = `${other}.away`;
  renameSync(other, aside);
  const oldRecord = readFileSync(recordPath(alice.dir, 'team'));

  const first = rotateIdentity(alice.dir, alice.key);
  assert.is(first.finished, false);
  assert.equal(
    first.failed.map((f) => f.name),
    ['other'],
  );
  assert.equal(
    first.resealed.map((c) => c.name),
    ['team'],
  );
  assert.ok(readFileSync(join(alice.dir, 'identity.json'), 'utf8').includes('retiring'));
  return { alice, oldRecord, bringBack: () => renameSync(aside, other) };
}

test('a crash between a re-seal file and its record: rotate run again pins the record to the new key and finishes', async () => {
  const { alice, oldRecord, bringBack } = await halfRotated();
  // The crash state: team's file re-sealed to the new key, its record still pinning the old one.
  writeFileSync(recordPath(alice.dir, 'team'), oldRecord);
  bringBack();

  const again = rotateIdentity(alice.dir, alice.key);
  assert.equal(again.failed, [], JSON.stringify(again.failed));
  assert.is(again.finished, true);
  assert.is(again.resumed, true);
  assert.equal(again.resealed.map((c) => c.name).sort(), ['other', 'team']);
  assert.not.ok(readFileSync(join(alice.dir, 'identity.json'), 'utf8').includes('retiring'), 'old keys left');
  const now = identityPublic(alice.dir, alice.key);
  const record = JSON.parse(readFileSync(recordPath(alice.dir, 'team'), 'utf8')) as { owner: { ed25519: string } };
  assert.is(record.owner.ed25519, now.ed25519.toString('hex'));
  wipe(alice.secret.x25519);
  wipe(alice.secret.ed25519);
  alice.secret = identitySecret(alice.dir, alice.key);
  assert.is(read(alice, 'team').get('A'), 'alpha');
});

/** Runs `fn`, which must throw `code`, and returns the secure buffers it allocated that are not wiped. */
function unwipedAfter(fn: () => unknown, code: string): number {
  const s = loadSodium() as unknown as { sodium_malloc: (n: number) => Buffer };
  const malloc = s.sodium_malloc;
  const made: Buffer[] = [];
  s.sodium_malloc = (n: number) => {
    const b = malloc(n);
    made.push(b);
    return b;
  };
  try {
    fn();
    assert.unreachable('it should have refused');
  } catch (err) {
    assert.is((err as VaultError).code, code, (err as Error).message);
  } finally {
    s.sodium_malloc = malloc;
  }
  assert.ok(made.length > 0, 'the secret keys were decrypted');
  return made.filter((b) => b.length > 0).length;
}

test('a rotation that cannot resume wipes every secret key it decrypted', async () => {
  const { alice } = await halfRotated();
  const path = join(alice.dir, 'identity.json');
  const good = readFileSync(path, 'utf8');
  const doc = JSON.parse(good) as { rotations: string[]; secret: { wrapped: string } };
  // The last statement damaged: parseStatement refuses after both key pairs are open.
  writeFileSync(path, JSON.stringify({ ...doc, rotations: [...doc.rotations.slice(0, -1), 'stash-rotation-v1:AAAA'] }));
  assert.is(
    unwipedAfter(() => rotateIdentity(alice.dir, alice.key), 'BAD_ROTATION'),
    0,
  );
  // The current secret keys damaged: they do not decrypt, after the retiring ones did.
  const w = doc.secret.wrapped;
  const flipped = `${w.slice(0, -2)}${w.endsWith('00') ? '01' : '00'}`;
  writeFileSync(path, JSON.stringify({ ...doc, secret: { ...doc.secret, wrapped: flipped } }));
  assert.is(
    unwipedAfter(() => rotateIdentity(alice.dir, alice.key), 'VAULT_CORRUPT'),
    0,
  );
  writeFileSync(path, good);
});

test.run();
