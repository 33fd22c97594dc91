/**
 * Every byte of a container file matters: flipping any one of them, truncating
 * or extending the file gives CONTAINER_CORRUPT naming the file, and changes
 * nothing on disk.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import {
  containerInfo,
  createContainer,
  readEntries,
  unwrapContentKey,
  vaultPaths,
  writeEntry,
  deleteEntry,
} from '../../src/vault/index.js';
import { cleanup, expectCode, newVault, type TestVault } from './vault-fixture.js';

test.after.each(cleanup);

async function sample(): Promise<{ v: TestVault; ck: Buffer; path: string; good: Buffer }> {
  const v = await newVault();
  createContainer(v.dir, v.key, 'prod');
  const ck = unwrapContentKey(v.dir, v.key, 'prod');
  writeEntry(v.dir, 'prod', ck, 'API_KEY', Buffer.from('k-123'));
  writeEntry(v.dir, 'prod', ck, 'DB_URL', Buffer.from('postgres://u:p@h/db'));
  const path = vaultPaths(v.dir).container('prod');
  return { v, ck, path, good: readFileSync(path) };
}

// Regions of a version-1 file with the 4-character name "prod" (docs/container-format.md).
const REGIONS: Array<[string, number, number]> = [
  ['magic', 0, 8],
  ['version', 8, 10],
  ['vault id', 10, 26],
  ['container id', 26, 42],
  ['wrap nonce', 42, 66],
  ['wrapped key', 66, 114],
  ['key commitment', 114, 146],
  ['body nonce', 146, 170],
  ['name', 170, 175],
  ['header checksum', 175, 191],
  ['ciphertext', 191, -16],
  ['tag', -16, 0],
];

test('flipping any bit pattern in any byte gives CONTAINER_CORRUPT and leaves the file as it was', async () => {
  const { v, ck, path, good } = await sample();
  const seen = new Set<string>();
  for (let i = 0; i < good.length; i++) {
    for (const mask of [0x01, 0x80]) {
      const bad = Buffer.from(good);
      bad[i]! ^= mask;
      writeFileSync(path, bad);
      const e = expectCode(() => readEntries(v.dir, 'prod', ck), 'CONTAINER_CORRUPT', `byte ${i} ^ ${mask}`);
      assert.ok(e.message.includes(path), `byte ${i}: message names the file: ${e.message}`);
      if (mask === 0x01) {
        expectCode(
          () => writeEntry(v.dir, 'prod', ck, 'NEW', Buffer.from('x')),
          'CONTAINER_CORRUPT',
          `write, byte ${i}`,
        );
        expectCode(() => deleteEntry(v.dir, 'prod', ck, 'API_KEY'), 'CONTAINER_CORRUPT', `delete, byte ${i}`);
      }
      assert.ok(readFileSync(path).equals(bad), `byte ${i}: refused writes changed the file`);
      const region = REGIONS.find(
        ([, from, to]) => i >= (from < 0 ? good.length + from : from) && i < (to <= 0 ? good.length + to : to),
      );
      seen.add(region![0]);
    }
  }
  assert.equal([...seen].sort(), REGIONS.map(([n]) => n).sort(), 'every region was exercised');
  writeFileSync(path, good);
  assert.is(readEntries(v.dir, 'prod', ck).get('API_KEY')!.toString(), 'k-123');
});

test('header damage is also caught by the key-only operations', async () => {
  const { v, path, good } = await sample();
  for (let i = 0; i < 191; i++) {
    const bad = Buffer.from(good);
    bad[i]! ^= 0x04;
    writeFileSync(path, bad);
    expectCode(() => unwrapContentKey(v.dir, v.key, 'prod'), 'CONTAINER_CORRUPT', `unwrap, byte ${i}`);
    expectCode(() => containerInfo(v.dir, 'prod'), 'CONTAINER_CORRUPT', `info, byte ${i}`);
  }
});

test('truncated and extended files are CONTAINER_CORRUPT', async () => {
  const { v, ck, path, good } = await sample();
  const lengths = [0, 1, 7, 8, 9, 170, 171, 174, 190, 191, 192, 206, good.length - 16, good.length - 1];
  for (const len of lengths) {
    writeFileSync(path, good.subarray(0, len));
    const e = expectCode(() => readEntries(v.dir, 'prod', ck), 'CONTAINER_CORRUPT', `length ${len}`);
    assert.ok(e.message.includes(path));
  }
  for (const extra of [Buffer.from([0]), Buffer.alloc(256), Buffer.from('garbage')]) {
    writeFileSync(path, Buffer.concat([good, extra]));
    expectCode(() => readEntries(v.dir, 'prod', ck), 'CONTAINER_CORRUPT', `extended by ${extra.length}`);
  }
  writeFileSync(path, Buffer.alloc(3 * 1024 * 1024));
  assert.match(
    expectCode(() => readEntries(v.dir, 'prod', ck), 'CONTAINER_CORRUPT').message,
    /larger than any container/,
  );
});

test('an older copy of the same container still opens (rollback is out of scope, documented)', async () => {
  const { v, ck, path, good } = await sample();
  writeEntry(v.dir, 'prod', ck, 'API_KEY', Buffer.from('rotated'));
  writeFileSync(path, good);
  assert.is(readEntries(v.dir, 'prod', ck).get('API_KEY')!.toString(), 'k-123');
});

test.run();
