import { readFileSync, statSync, writeFileSync, mkdirSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import {
  changePassword,
  createContainer,
  identityPublic,
  initVault,
  kdfPreset,
  readEntries,
  readVaultInfo,
  unlockVault,
  unwrapContentKey,
  vaultExists,
  vaultPaths,
  verifyVaultKey,
  wipe,
  writeEntry,
} from '../../src/vault/index.js';
import { decodeMeta, encodeMeta } from '../../src/vault/vault-meta.js';
import {
  assertSameTree,
  cleanup,
  expectCode,
  expectCodeAsync,
  newVault,
  PASSWORD,
  snapshot,
  tempRoot,
} from './vault-fixture.js';

test.after.each(cleanup);

test('init creates a vault that unlocks with its password', async () => {
  const dir = join(tempRoot(), 'a', 'b', 'vault');
  assert.not.ok(vaultExists(dir));
  const info = await initVault(dir, Buffer.from('pw'), { kdf: 'test' });
  assert.ok(vaultExists(dir));
  assert.match(info.vaultId, /^[0-9a-f]{32}$/);
  assert.is(info.formatVersion, 1);
  assert.equal(info.kdf, kdfPreset('test'));
  assert.ok(Math.abs(Date.parse(info.createdAt) - Date.now()) < 60_000);
  assert.equal(readVaultInfo(dir), info);
  const key = await unlockVault(dir, Buffer.from('pw'));
  assert.is(key.length, 32);
  verifyVaultKey(dir, key);
  assert.ok(
    existsSync(vaultPaths(dir).identity) &&
      existsSync(vaultPaths(dir).contacts) &&
      existsSync(vaultPaths(dir).containers),
  );
});

test('each vault gets its own id and key', async () => {
  const a = await newVault();
  const b = await newVault();
  assert.is.not(readVaultInfo(a.dir).vaultId, readVaultInfo(b.dir).vaultId);
  assert.not.ok(a.key.equals(b.key));
  expectCode(() => verifyVaultKey(a.dir, b.key), 'VAULT_KEY_MISMATCH');
});

test('init refuses an existing vault and leftovers of one', async () => {
  const v = await newVault();
  const before = snapshot(v.dir);
  await expectCodeAsync(() => initVault(v.dir, Buffer.from('other'), { kdf: 'test' }), 'VAULT_EXISTS');
  assertSameTree(before, snapshot(v.dir), 'second init');
  const partial = join(tempRoot(), 'partial');
  mkdirSync(partial);
  writeFileSync(join(partial, 'identity.json'), '{}');
  const e = await expectCodeAsync(() => initVault(partial, Buffer.from('pw'), { kdf: 'test' }), 'VAULT_EXISTS');
  assert.match(e.message, /identity\.json/);
});

test('bad passwords and presets are refused before anything is written', async () => {
  const dir = join(tempRoot(), 'v');
  await expectCodeAsync(() => initVault(dir, Buffer.alloc(0), { kdf: 'test' }), 'INVALID_PASSWORD');
  await expectCodeAsync(() => initVault(dir, 'pw' as unknown as Buffer, { kdf: 'test' }), 'INVALID_PASSWORD');
  await expectCodeAsync(() => initVault(dir, Buffer.from('pw'), { kdf: 'fast' as 'test' }), 'INVALID_ARGUMENT');
  assert.not.ok(existsSync(dir));
});

test('wrong password: WRONG_PASSWORD, and every vault file stays byte-identical', async () => {
  const v = await newVault();
  createContainer(v.dir, v.key, 'prod');
  const before = snapshot(v.dir);
  const e = await expectCodeAsync(() => unlockVault(v.dir, Buffer.from(`${PASSWORD}x`)), 'WRONG_PASSWORD');
  assert.not.match(e.message, PASSWORD);
  await expectCodeAsync(() => unlockVault(v.dir, Buffer.from('')), 'INVALID_PASSWORD');
  assertSameTree(before, snapshot(v.dir), 'after wrong passwords');
});

test('missing vault: VAULT_NOT_FOUND', async () => {
  const dir = join(tempRoot(), 'none');
  expectCode(() => readVaultInfo(dir), 'VAULT_NOT_FOUND');
  await expectCodeAsync(() => unlockVault(dir, Buffer.from('pw')), 'VAULT_NOT_FOUND');
});

test('change password: the old one fails, the new one works, data and identity stay', async () => {
  const v = await newVault();
  createContainer(v.dir, v.key, 'prod');
  const ck = unwrapContentKey(v.dir, v.key, 'prod');
  writeEntry(v.dir, 'prod', ck, 'TOKEN', Buffer.from('abc'));
  const id = identityPublic(v.dir).fingerprint;
  const info = readVaultInfo(v.dir);
  const container = readFileSync(vaultPaths(v.dir).container('prod'));
  const saltBefore = JSON.parse(readFileSync(vaultPaths(v.dir).meta, 'utf8')).kdf.salt;

  await changePassword(v.dir, v.key, Buffer.from('new password'));
  await expectCodeAsync(() => unlockVault(v.dir, v.password), 'WRONG_PASSWORD');
  const key2 = await unlockVault(v.dir, Buffer.from('new password'));
  assert.ok(key2.equals(v.key), 'the vault key itself does not change');
  assert.equal(readVaultInfo(v.dir), info);
  assert.is.not(JSON.parse(readFileSync(vaultPaths(v.dir).meta, 'utf8')).kdf.salt, saltBefore, 'a fresh salt');
  assert.ok(readFileSync(vaultPaths(v.dir).container('prod')).equals(container), 'containers are not rewritten');
  assert.is(identityPublic(v.dir, key2).fingerprint, id);
  assert.is(
    readEntries(v.dir, 'prod', unwrapContentKey(v.dir, key2, 'prod'))
      .get('TOKEN')!
      .toString(),
    'abc',
  );
});

test('change password can raise the KDF cost', async () => {
  const v = await newVault();
  await changePassword(v.dir, v.key, Buffer.from('stronger'), { kdf: 'interactive' });
  assert.equal(readVaultInfo(v.dir).kdf, kdfPreset('interactive'));
  assert.ok((await unlockVault(v.dir, Buffer.from('stronger'))).equals(v.key));
});

test('change password with a key of another vault writes nothing', async () => {
  const v = await newVault();
  const other = await newVault();
  const before = snapshot(v.dir);
  await expectCodeAsync(() => changePassword(v.dir, other.key, Buffer.from('x')), 'VAULT_KEY_MISMATCH');
  await expectCodeAsync(() => changePassword(v.dir, Buffer.alloc(31), Buffer.from('x')), 'INVALID_ARGUMENT');
  assertSameTree(before, snapshot(v.dir), 'after refused change');
});

test('verifyVaultKey rejects random, short and foreign keys', async () => {
  const v = await newVault();
  verifyVaultKey(v.dir, Buffer.from(v.key));
  expectCode(() => verifyVaultKey(v.dir, Buffer.alloc(32, 7)), 'VAULT_KEY_MISMATCH');
  expectCode(() => verifyVaultKey(v.dir, Buffer.alloc(16)), 'INVALID_ARGUMENT');
});

test('damaged vault.json is VAULT_CORRUPT, not a wrong password', async () => {
  const v = await newVault();
  const path = vaultPaths(v.dir).meta;
  const good = readFileSync(path, 'utf8');
  const cases: Array<[string, string]> = [
    ['truncated', good.slice(0, 100)],
    ['empty', ''],
    ['not JSON', 'hello'],
    ['opslimit edited', good.replace(/"opslimit": \d+/, '"opslimit": 2')],
    ['future version', good.replace('"formatVersion": 1', '"formatVersion": 2')],
    ['uppercase hex', good.replace(/"vaultId": "([0-9a-f]+)"/, (_m, h: string) => `"vaultId": "${h.toUpperCase()}"`)],
  ];
  for (const [what, text] of cases) {
    writeFileSync(path, text);
    await expectCodeAsync(() => unlockVault(v.dir, v.password), 'VAULT_CORRUPT', what);
    expectCode(() => readVaultInfo(v.dir), 'VAULT_CORRUPT', what);
  }
  writeFileSync(path, good);
  assert.ok((await unlockVault(v.dir, v.password)).equals(v.key));
});

test('absurd KDF parameters are refused before the KDF runs', async () => {
  const v = await newVault();
  const path = vaultPaths(v.dir).meta;
  const m = decodeMeta(readFileSync(path), path);
  for (const kdf of [
    { opslimit: 1, memlimit: 2 ** 40 },
    { opslimit: 10_000, memlimit: 8192 },
    { opslimit: 0, memlimit: 8192 },
  ]) {
    writeFileSync(path, encodeMeta({ ...m, kdf: { ...m.kdf, ...kdf } }));
    const e = await expectCodeAsync(() => unlockVault(v.dir, v.password), 'VAULT_CORRUPT');
    assert.match(e.message, /out of range/);
  }
});

test('header fields are bound to the wrapped key: a consistent edit still fails to unlock', async () => {
  const v = await newVault();
  const path = vaultPaths(v.dir).meta;
  const m = decodeMeta(readFileSync(path), path);
  // encodeMeta recomputes the checksum, as a deliberate attacker would.
  const edits = {
    vaultId: { ...m, vaultId: Buffer.alloc(16, 1) },
    createdAt: { ...m, createdAt: '2000-01-01T00:00:00.000Z' },
    salt: { ...m, kdf: { ...m.kdf, salt: Buffer.alloc(16, 2) } },
    memlimit: { ...m, kdf: { ...m.kdf, memlimit: 16384 } },
  };
  for (const [what, edited] of Object.entries(edits)) {
    writeFileSync(path, encodeMeta(edited));
    await expectCodeAsync(() => unlockVault(v.dir, v.password), 'WRONG_PASSWORD', what);
  }
});

test('files are 0600 and folders 0700, whatever the umask', async () => {
  if (process.platform === 'win32') return;
  const old = process.umask(0);
  try {
    const v = await newVault();
    createContainer(v.dir, v.key, 'c1');
    await changePassword(v.dir, v.key, Buffer.from('again'));
    for (const [path, desc] of snapshot(v.dir)) {
      const mode = statSync(path).mode & 0o777;
      assert.is(mode, desc.startsWith('dir') ? 0o700 : 0o600, `${path} has mode ${mode.toString(8)}`);
    }
    assert.is(statSync(v.dir).mode & 0o777, 0o700);
  } finally {
    process.umask(old);
  }
});

test('the vault key from unlock is a secure buffer and wipe() clears it', async () => {
  const v = await newVault();
  const key = await unlockVault(v.dir, v.password);
  assert.is((key as Buffer & { secure?: boolean }).secure, true);
  wipe(key);
  assert.is(key.length, 0, 'freed: its memory is detached');
  wipe(key); // twice is harmless
});

test.run();
