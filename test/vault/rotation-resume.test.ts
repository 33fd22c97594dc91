/**
 * Finishing an interrupted identity rotation (src/vault/rotation/rotate.ts)
 * from the states a crash really leaves on disk: real vaults, real files.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createContainer, identityPublic, identitySecret, wipe } from '../../src/vault/index.js';
import { recordPath } from '../../src/vault/sharing/records.js';
import { exportShared, linkShared, shareContainer } from '../../src/vault/sharing/index.js';
import { rotateIdentity } from '../../src/vault/rotation/index.js';
import { read, threeMembers } from './sharing-people.js';
import { cleanup, tempRoot } from './vault-fixture.js';

test.after.each(cleanup);

test('a crash between a re-seal file and its record: rotate run again pins the record to the new key and finishes', async () => {
  const { alice, bob } = await threeMembers();
  // A second owned container whose linked file is away: the first rotate stops with the old keys kept.
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

  // The crash state: team's file re-sealed to the new key, its record still pinning the old one.
  writeFileSync(recordPath(alice.dir, 'team'), oldRecord);
  renameSync(aside, other);

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

test.run();
