import { copyFileSync, mkdirSync, readFileSync, renameSync, statSync, writeFileSync } from 'node:fs';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { sealWithNonce } from '../../src/vault/aead.js';
import {
  changeTime,
  containerInfo,
  createContainer,
  deleteEntry,
  listContainers,
  MAX_VALUE_BYTES,
  readEntries,
  readEntry,
  removeContainer,
  unwrapContentKey,
  updateEntries,
  vaultPaths,
  wipe,
  wipeEntries,
  writeEntry,
} from '../../src/vault/index.js';
import { assertSameTree, cleanup, expectCode, newVault, snapshot } from './vault-fixture.js';

test.after.each(cleanup);

const isSecure = (b: Buffer) => (b as Buffer & { secure?: boolean }).secure === true;

test('create, info, list and remove containers', async () => {
  const v = await newVault();
  assert.equal(listContainers(v.dir), []);
  const c = createContainer(v.dir, v.key, 'prod');
  assert.is(c.name, 'prod');
  assert.match(c.id, /^[0-9a-f]{32}$/);
  assert.is(c.path, vaultPaths(v.dir).container('prod'));
  assert.is(c.entries, 0);
  const d = createContainer(v.dir, v.key, 'dev.local_2-x');
  assert.is.not(d.id, c.id);
  const info = containerInfo(v.dir, 'prod');
  assert.equal({ name: info.name, id: info.id, path: info.path }, { name: 'prod', id: c.id, path: c.path });
  const list = listContainers(v.dir);
  assert.equal(
    list.map((x) => [x.name, x.id, x.problem]),
    [
      ['dev.local_2-x', d.id, null],
      ['prod', c.id, null],
    ],
  );
  assert.is(list[1]!.size, statSync(c.path).size);
  assert.instance(list[1]!.modified, Date);
  expectCode(() => createContainer(v.dir, v.key, 'prod'), 'CONTAINER_EXISTS');
  removeContainer(v.dir, 'prod');
  expectCode(() => removeContainer(v.dir, 'prod'), 'CONTAINER_NOT_FOUND');
  expectCode(() => containerInfo(v.dir, 'prod'), 'CONTAINER_NOT_FOUND');
  expectCode(() => unwrapContentKey(v.dir, v.key, 'prod'), 'CONTAINER_NOT_FOUND');
  assert.equal(
    listContainers(v.dir).map((x) => x.name),
    ['dev.local_2-x'],
  );
});

test('entries: write, read, replace, delete; values are binary-safe', async () => {
  const v = await newVault();
  createContainer(v.dir, v.key, 'prod');
  const ck = unwrapContentKey(v.dir, v.key, 'prod');
  assert.equal([...readEntries(v.dir, 'prod', ck).keys()], []);
  const binary = Buffer.from([0, 255, 10, 13, 0, 128]);
  writeEntry(v.dir, 'prod', ck, 'DB_PASSWORD', Buffer.from('hunter2'));
  writeEntry(v.dir, 'prod', ck, 'BLOB', binary);
  writeEntry(v.dir, 'prod', ck, 'EMPTY', Buffer.alloc(0));
  writeEntry(v.dir, 'prod', ck, '_x', Buffer.from('y'));
  writeEntry(v.dir, 'prod', ck, 'DB_PASSWORD', Buffer.from('hunter3'));
  const e = readEntries(v.dir, 'prod', ck);
  assert.equal([...e.keys()], ['BLOB', 'DB_PASSWORD', 'EMPTY', '_x']);
  assert.ok(e.get('BLOB')!.equals(binary));
  assert.is(e.get('DB_PASSWORD')!.toString(), 'hunter3');
  assert.is(e.get('EMPTY')!.length, 0);
  wipeEntries(e);
  assert.is(e.size, 0);
  const one = readEntry(v.dir, 'prod', ck, 'DB_PASSWORD');
  assert.ok(isSecure(one));
  assert.is(one.toString(), 'hunter3');
  expectCode(() => readEntry(v.dir, 'prod', ck, 'NOPE'), 'ENTRY_NOT_FOUND');
  assert.ok(deleteEntry(v.dir, 'prod', ck, 'BLOB'));
  const before = snapshot(v.dir);
  assert.not.ok(deleteEntry(v.dir, 'prod', ck, 'BLOB'));
  assertSameTree(before, snapshot(v.dir), 'deleting a missing entry writes nothing');
  assert.equal([...readEntries(v.dir, 'prod', ck).keys()], ['DB_PASSWORD', 'EMPTY', '_x']);
});

test('updateEntries applies several changes in one write', async () => {
  const v = await newVault();
  createContainer(v.dir, v.key, 'c');
  const ck = unwrapContentKey(v.dir, v.key, 'c');
  writeEntry(v.dir, 'c', ck, 'A', Buffer.from('1'));
  const changed = updateEntries(
    v.dir,
    'c',
    ck,
    new Map([
      ['A', null],
      ['B', Buffer.from('2')],
      ['C', Buffer.from('3')],
      ['Z', null],
    ]),
  );
  assert.equal(changed, ['A', 'B', 'C']);
  assert.equal([...readEntries(v.dir, 'c', ck).keys()], ['B', 'C']);
  const before = snapshot(v.dir);
  assert.equal(updateEntries(v.dir, 'c', ck, new Map([['B', Buffer.from('2')]])), [], 'same value: no change');
  expectCode(
    () =>
      updateEntries(
        v.dir,
        'c',
        ck,
        new Map([
          ['D', Buffer.from('4')],
          ['bad//path', Buffer.from('5')],
        ]),
      ),
    'INVALID_NAME',
  );
  assertSameTree(before, snapshot(v.dir), 'no-op and invalid updates write nothing');
});

test('keys are secure buffers; a foreign vault key or content key is refused', async () => {
  const v = await newVault();
  const other = await newVault();
  createContainer(v.dir, v.key, 'a');
  createContainer(v.dir, v.key, 'b');
  const ka = unwrapContentKey(v.dir, v.key, 'a');
  const kb = unwrapContentKey(v.dir, v.key, 'b');
  assert.ok(isSecure(ka) && ka.length === 32);
  assert.not.ok(ka.equals(kb));
  expectCode(() => unwrapContentKey(v.dir, other.key, 'a'), 'VAULT_KEY_MISMATCH');
  expectCode(() => createContainer(v.dir, other.key, 'c'), 'VAULT_KEY_MISMATCH');
  const before = snapshot(v.dir);
  expectCode(() => readEntries(v.dir, 'a', kb), 'CONTENT_KEY_MISMATCH');
  expectCode(() => writeEntry(v.dir, 'a', kb, 'X', Buffer.from('1')), 'CONTENT_KEY_MISMATCH');
  expectCode(() => readEntries(v.dir, 'a', Buffer.alloc(31)), 'INVALID_ARGUMENT');
  assertSameTree(before, snapshot(v.dir), 'refused writes');
  wipe(ka);
  assert.is(ka.length, 0);
});

test('container and entry names are validated', async () => {
  const v = await newVault();
  const before = snapshot(v.dir);
  const badContainers = [
    '',
    '.hidden',
    '-x',
    '_x',
    '../etc',
    'a/b',
    'a\\b',
    'a b',
    'é',
    'x'.repeat(65),
    'con',
    'NUL.txt',
    'com1',
    'x.',
    'a\0b',
  ];
  for (const name of badContainers) {
    const e = expectCode(() => createContainer(v.dir, v.key, name), 'INVALID_NAME', JSON.stringify(name));
    assert.ok(e.message.length < 300);
    expectCode(() => containerInfo(v.dir, name), 'INVALID_NAME');
    expectCode(() => removeContainer(v.dir, name), 'INVALID_NAME');
  }
  assertSameTree(before, snapshot(v.dir), 'invalid names');
  createContainer(v.dir, v.key, 'x'.repeat(64));
  createContainer(v.dir, v.key, '0');
  createContainer(v.dir, v.key, 'console');
  const ck = unwrapContentKey(v.dir, v.key, '0');
  const tooLong = `${'a'.repeat(128)}/${'b'.repeat(128)}`;
  for (const name of [
    '',
    'A B',
    'Ä',
    'A'.repeat(129),
    'A\n',
    '/a',
    'a/',
    'a//b',
    '..',
    'a/../b',
    'a/./b',
    tooLong,
    'a#',
    'a#Bad',
  ]) {
    expectCode(() => writeEntry(v.dir, '0', ck, name, Buffer.from('v')), 'INVALID_NAME', JSON.stringify(name));
  }
  for (const name of [
    'A'.repeat(128),
    '_',
    'lower_case9',
    '1ABC',
    'A-B',
    'A.B',
    'web/github.com',
    'a@b/c',
    tooLong.slice(1),
  ])
    writeEntry(v.dir, '0', ck, name, Buffer.from('v'));
  writeEntry(v.dir, '0', ck, 'web/github.com#username', Buffer.from('pat'));
  expectCode(
    () => writeEntry(v.dir, '0', ck, 'no/entry#username', Buffer.from('v')),
    'INVALID_ARGUMENT',
    'a field needs its entry',
  );
});

test('size limits: 64 KiB per value, 1 MiB per container', async () => {
  const v = await newVault();
  createContainer(v.dir, v.key, 'big');
  const ck = unwrapContentKey(v.dir, v.key, 'big');
  writeEntry(v.dir, 'big', ck, 'MAX', Buffer.alloc(MAX_VALUE_BYTES, 1));
  expectCode(() => writeEntry(v.dir, 'big', ck, 'TOO_BIG', Buffer.alloc(MAX_VALUE_BYTES + 1)), 'CONTAINER_FULL');
  for (let i = 0; i < 14; i++) writeEntry(v.dir, 'big', ck, `V${i}`, Buffer.alloc(MAX_VALUE_BYTES, i));
  const before = snapshot(v.dir);
  const e = expectCode(() => writeEntry(v.dir, 'big', ck, 'ONE_MORE', Buffer.alloc(MAX_VALUE_BYTES)), 'CONTAINER_FULL');
  assert.match(e.message, /1 MiB/);
  assertSameTree(before, snapshot(v.dir), 'refused write');
  assert.is(readEntries(v.dir, 'big', ck).size, 15);
  expectCode(() => writeEntry(v.dir, 'big', ck, 'S', 'text' as unknown as Buffer), 'INVALID_ARGUMENT');
});

test('each entry records when it last changed; unchanged entries keep their time', async () => {
  const v = await newVault();
  createContainer(v.dir, v.key, 'prod');
  const ck = unwrapContentKey(v.dir, v.key, 'prod');
  const t0 = Date.now();
  writeEntry(v.dir, 'prod', ck, 'A', Buffer.from('1'));
  await new Promise((r) => setTimeout(r, 20));
  const t1 = Date.now();
  writeEntry(v.dir, 'prod', ck, 'B', Buffer.from('2'));
  writeEntry(v.dir, 'prod', ck, 'B', Buffer.from('2')); // the same value: nothing is written
  const e = readEntries(v.dir, 'prod', ck);
  const a = changeTime(e, 'A');
  const b = changeTime(e, 'B');
  wipeEntries(e);
  assert.ok(a >= t0 && a < t1, `A changed at ${a}, between ${t0} and ${t1}`);
  assert.ok(b >= t1 && b <= Date.now(), `B changed at ${b}, after ${t1}`);
  deleteEntry(v.dir, 'prod', ck, 'B');
  const after = readEntries(v.dir, 'prod', ck);
  assert.is(changeTime(after, 'A'), a, 'deleting B left the time of A alone');
  wipeEntries(after);
});

test('a container written before change times existed opens unchanged; its next write adds them', async () => {
  const v = await newVault();
  const c = createContainer(v.dir, v.key, 'old');
  const ck = unwrapContentKey(v.dir, v.key, 'old');
  // The body exactly as stash wrote it before change times: entries, then zero padding.
  const entry = (name: string, value: string): Buffer => {
    const len = Buffer.alloc(4);
    len.writeUInt32LE(value.length);
    return Buffer.concat([Buffer.from([name.length]), Buffer.from(name), len, Buffer.from(value)]);
  };
  const raw = Buffer.concat([Buffer.from([2, 0, 0, 0]), entry('A', 'one'), entry('B', 'two')]);
  const plain = Buffer.concat([raw, Buffer.alloc(256 - raw.length)]);
  const file = readFileSync(c.path);
  const header = file.subarray(0, 187 + 'old'.length);
  writeFileSync(c.path, Buffer.concat([header, sealWithNonce(plain, header, header.subarray(146, 170), ck)]));
  const old = readEntries(v.dir, 'old', ck);
  assert.equal(
    [...old.entries()].map(([k, val]) => [k, val.toString()]),
    [
      ['A', 'one'],
      ['B', 'two'],
    ],
  );
  assert.equal([changeTime(old, 'A'), changeTime(old, 'B')], [0, 0], 'no times: unknown');
  wipeEntries(old);
  writeEntry(v.dir, 'old', ck, 'B', Buffer.from('TWO'));
  const now = readEntries(v.dir, 'old', ck);
  assert.is(now.get('A')!.toString(), 'one');
  assert.is(now.get('B')!.toString(), 'TWO');
  assert.is(changeTime(now, 'A'), 0, 'A was not changed: still unknown');
  assert.ok(changeTime(now, 'B') > 0);
  wipeEntries(now);
});

test('a container filled to 1 MiB keeps working: the change times are left out rather than refused', async () => {
  const v = await newVault();
  createContainer(v.dir, v.key, 'full');
  const ck = unwrapContentKey(v.dir, v.key, 'full');
  // 15 values of 64 KiB and one that brings the entries within a few bytes of 1 MiB.
  const changes = new Map<string, Buffer>();
  for (let i = 0; i < 15; i++) changes.set(`V${String(i).padStart(2, '0')}`, Buffer.alloc(MAX_VALUE_BYTES, i));
  const used = 9 + 15 * (2 + 3 + 4 + MAX_VALUE_BYTES);
  changes.set('W', Buffer.alloc(1024 * 1024 - used - (2 + 1 + 4) - 10, 0x77));
  updateEntries(v.dir, 'full', ck, changes);
  const e = readEntries(v.dir, 'full', ck);
  assert.is(e.size, 16);
  assert.is(changeTime(e, 'W'), 0, 'no room for the times');
  wipeEntries(e);
  deleteEntry(v.dir, 'full', ck, 'V00');
  const smaller = readEntries(v.dir, 'full', ck);
  assert.is(smaller.size, 15);
  assert.ok(
    changeTime(smaller, 'W') === 0 && changeTime(smaller, 'V01') === 0,
    'room again, but the times are still unknown',
  );
  wipeEntries(smaller);
});

test('padding hides the exact length of the secrets', async () => {
  const v = await newVault();
  createContainer(v.dir, v.key, 'p');
  const ck = unwrapContentKey(v.dir, v.key, 'p');
  const sizes = new Set<number>();
  for (const len of [1, 20, 100, 200]) {
    // keep 0: the values replaced would otherwise stay in the body as history, and grow it.
    updateEntries(v.dir, 'p', ck, new Map([['SECRET', Buffer.alloc(len, 0x41)]]), { keep: 0 });
    sizes.add(statSync(vaultPaths(v.dir).container('p')).size);
  }
  assert.is(sizes.size, 1, `one size for values of 1..200 bytes, got ${[...sizes]}`);
});

test('a renamed or swapped container file is refused (the name is authenticated)', async () => {
  const v = await newVault();
  createContainer(v.dir, v.key, 'prod');
  createContainer(v.dir, v.key, 'staging');
  const kp = unwrapContentKey(v.dir, v.key, 'prod');
  writeEntry(v.dir, 'prod', kp, 'URL', Buffer.from('https://prod'));
  const p = vaultPaths(v.dir);
  renameSync(p.container('prod'), p.container('tmp'));
  renameSync(p.container('staging'), p.container('prod'));
  renameSync(p.container('tmp'), p.container('staging'));
  const e = expectCode(() => readEntries(v.dir, 'staging', kp), 'CONTAINER_CORRUPT');
  assert.match(e.message, /holds container "prod"/);
  expectCode(() => unwrapContentKey(v.dir, v.key, 'prod'), 'CONTAINER_CORRUPT');
  expectCode(() => containerInfo(v.dir, 'prod'), 'CONTAINER_CORRUPT');
  assert.ok(listContainers(v.dir).every((c) => c.problem !== null && c.id === ''));
});

test('a container copied in from another vault is refused', async () => {
  const v = await newVault();
  const other = await newVault();
  createContainer(other.dir, other.key, 'theirs');
  const theirKey = unwrapContentKey(other.dir, other.key, 'theirs');
  copyFileSync(vaultPaths(other.dir).container('theirs'), vaultPaths(v.dir).container('theirs'));
  assert.match(
    expectCode(() => readEntries(v.dir, 'theirs', theirKey), 'CONTAINER_CORRUPT').message,
    /different vault/,
  );
  expectCode(() => unwrapContentKey(v.dir, v.key, 'theirs'), 'CONTAINER_CORRUPT');
  assert.match(listContainers(v.dir)[0]!.problem ?? '', /different vault/);
});

test('listing skips temp files and foreign names, and reports damaged headers', async () => {
  const v = await newVault();
  createContainer(v.dir, v.key, 'good');
  const p = vaultPaths(v.dir);
  writeFileSync(`${p.containers}/.good.stash.tmp-0011aa`, 'half written');
  writeFileSync(`${p.containers}/notes.txt`, 'x');
  writeFileSync(`${p.containers}/bad name.stash`, 'x');
  writeFileSync(p.container('junk'), 'not a container');
  mkdirSync(p.container('folder'));
  const list = listContainers(v.dir);
  assert.equal(
    list.map((c) => c.name),
    ['folder', 'good', 'junk'],
  );
  assert.match(list[0]!.problem ?? '', /not a regular file/);
  assert.is(list[1]!.problem, null);
  assert.match(list[2]!.problem ?? '', /junk\.stash.*magic/);
  expectCode(() => containerInfo(v.dir, 'folder'), 'CONTAINER_CORRUPT');
  expectCode(() => readEntries(v.dir, 'folder', v.key), 'CONTAINER_CORRUPT');
});

test('operations on a folder without a vault are VAULT_NOT_FOUND', async () => {
  const v = await newVault();
  createContainer(v.dir, v.key, 'c');
  const ck = unwrapContentKey(v.dir, v.key, 'c');
  const missing = `${v.dir}-missing`;
  expectCode(() => listContainers(missing), 'VAULT_NOT_FOUND');
  expectCode(() => containerInfo(missing, 'c'), 'VAULT_NOT_FOUND');
  expectCode(() => readEntries(missing, 'c', ck), 'VAULT_NOT_FOUND');
  expectCode(() => writeEntry(missing, 'c', ck, 'A', Buffer.from('1')), 'VAULT_NOT_FOUND');
  expectCode(() => removeContainer(missing, 'c'), 'VAULT_NOT_FOUND');
  expectCode(() => createContainer(missing, v.key, 'c'), 'VAULT_NOT_FOUND');
});

test('a key read from one container file cannot decrypt another with the same name', async () => {
  const v = await newVault();
  createContainer(v.dir, v.key, 'c');
  const k1 = unwrapContentKey(v.dir, v.key, 'c');
  removeContainer(v.dir, 'c');
  const c2 = createContainer(v.dir, v.key, 'c');
  expectCode(() => readEntries(v.dir, 'c', k1), 'CONTENT_KEY_MISMATCH');
  assert.is(containerInfo(v.dir, 'c').id, c2.id);
  assert.ok(readFileSync(c2.path).length > 0);
});

test.run();
