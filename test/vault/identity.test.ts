import { createRequire } from 'node:module';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import {
  decodePublicKey,
  encodePublicKey,
  fingerprintOf,
  formatFingerprint,
  identityPublic,
  identitySecret,
  vaultPaths,
  wipe,
} from '../../src/vault/index.js';
import { cleanup, expectCode, newVault } from './vault-fixture.js';

const sodium = createRequire(import.meta.url)('sodium-native');

test.after.each(cleanup);

test('a new vault has an identity whose public half needs no password', async () => {
  const v = await newVault();
  const pub = identityPublic(v.dir);
  assert.is(pub.x25519.length, 32);
  assert.is(pub.ed25519.length, 32);
  assert.ok(pub.fingerprintBytes.equals(fingerprintOf(pub.x25519, pub.ed25519)));
  assert.is(pub.fingerprint, formatFingerprint(pub.fingerprintBytes));
  const authed = identityPublic(v.dir, v.key);
  assert.ok(authed.x25519.equals(pub.x25519) && authed.ed25519.equals(pub.ed25519));
  const published = decodePublicKey(encodePublicKey(pub));
  assert.ok(published.x25519.equals(pub.x25519));
  const other = await newVault();
  assert.is.not(identityPublic(other.dir).fingerprint, pub.fingerprint);
});

test('secret keys come back in secure buffers and really belong to the public keys', async () => {
  const v = await newVault();
  const pub = identityPublic(v.dir);
  const sec = identitySecret(v.dir, v.key);
  assert.is((sec.x25519 as Buffer & { secure?: boolean }).secure, true);
  assert.is((sec.ed25519 as Buffer & { secure?: boolean }).secure, true);
  assert.is(sec.x25519.length, 32);
  assert.is(sec.ed25519.length, 64);
  // Sign with the secret key, verify with the published public key.
  const msg = Buffer.from('hello');
  const sig = Buffer.alloc(64);
  sodium.crypto_sign_detached(sig, msg, sec.ed25519);
  assert.ok(sodium.crypto_sign_verify_detached(sig, msg, pub.ed25519));
  // Seal to the public X25519 key, open with the secret one.
  const sealed = Buffer.alloc(msg.length + 48);
  sodium.crypto_box_seal(sealed, msg, pub.x25519);
  const opened = Buffer.alloc(msg.length);
  assert.ok(sodium.crypto_box_seal_open(opened, sealed, pub.x25519, sec.x25519));
  assert.ok(opened.equals(msg));
  wipe(sec.x25519);
  wipe(sec.ed25519);
  assert.is(sec.x25519.length + sec.ed25519.length, 0);
});

test('a foreign or random vault key cannot read the secret keys', async () => {
  const v = await newVault();
  const other = await newVault();
  expectCode(() => identitySecret(v.dir, other.key), 'VAULT_KEY_MISMATCH');
  expectCode(() => identitySecret(v.dir, Buffer.alloc(32)), 'VAULT_KEY_MISMATCH');
  expectCode(() => identityPublic(v.dir, other.key), 'VAULT_KEY_MISMATCH');
});

test('swapped public keys are caught when the vault key is given', async () => {
  const v = await newVault();
  const other = await newVault();
  const path = vaultPaths(v.dir).identity;
  const doc = JSON.parse(readFileSync(path, 'utf8'));
  const theirs = identityPublic(other.dir);
  // A careful attacker also updates the displayed fingerprint.
  writeFileSync(
    path,
    JSON.stringify({
      ...doc,
      x25519: theirs.x25519.toString('hex'),
      ed25519: theirs.ed25519.toString('hex'),
      fingerprint: theirs.fingerprint,
    }),
  );
  assert.is(
    identityPublic(v.dir).fingerprint,
    theirs.fingerprint,
    'unauthenticated read shows the file as is (documented)',
  );
  assert.match(expectCode(() => identityPublic(v.dir, v.key), 'VAULT_CORRUPT').message, /identity\.json/);
  expectCode(() => identitySecret(v.dir, v.key), 'VAULT_CORRUPT');
});

test('damaged identity.json is VAULT_CORRUPT', async () => {
  const v = await newVault();
  const path = vaultPaths(v.dir).identity;
  const good = readFileSync(path, 'utf8');
  const doc = JSON.parse(good);
  const flip = (hex: string) => (hex[0] === '0' ? '1' : '0') + hex.slice(1);
  const cases: Array<[string, string]> = [
    ['not JSON', '{'],
    ['fingerprint field edited', JSON.stringify({ ...doc, fingerprint: '0000-0000-0000-0000-0000-0000' })],
    [
      'secret ciphertext edited',
      JSON.stringify({ ...doc, secret: { ...doc.secret, wrapped: flip(doc.secret.wrapped) } }),
    ],
    ['secret nonce edited', JSON.stringify({ ...doc, secret: { ...doc.secret, nonce: flip(doc.secret.nonce) } })],
    ['other vault id', JSON.stringify({ ...doc, vaultId: flip(doc.vaultId) })],
    ['bad public key', JSON.stringify({ ...doc, x25519: '00'.repeat(32) })],
  ];
  for (const [what, text] of cases) {
    writeFileSync(path, text);
    expectCode(() => identitySecret(v.dir, v.key), 'VAULT_CORRUPT', what);
  }
  rmSync(path);
  expectCode(() => identityPublic(v.dir), 'VAULT_CORRUPT', 'missing');
  writeFileSync(path, good);
  identitySecret(v.dir, v.key);
});

test.run();
