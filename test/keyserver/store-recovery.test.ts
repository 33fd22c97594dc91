/**
 * The start-up check skips damaged bytes and keeps every intact record
 * after them: real store files with bits flipped by hand, opened by the
 * real store.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { createHash, randomBytes } from 'node:crypto';
import { copyFileSync, existsSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ShareStore, type StoreOptions } from '../../src/keyserver/store/share-store.js';
import { MAGIC_V1, MAGIC_V2 } from '../../src/keyserver/store/log-format.js';
import { encodeRecord, type StoreRecord } from '../../src/keyserver/store/records.js';
import { readStateReadOnly } from '../../src/keyserver/store/read-only.js';
import { generateShareCode } from '../../src/keyserver/share-code.js';
import { ManualClock, MemoryLogger, http, identityPublicKey, startTestServer, tempDir } from './harness.js';
import { status } from '../../src/keyserver/client.js';

const key = identityPublicKey();

function options(dir: string, clock: ManualClock, logger = new MemoryLogger()): StoreOptions {
  return {
    dir,
    serverId: 0,
    originEpoch: 1,
    compactMinBytes: 1 << 30,
    clock,
    logger,
    sweepIntervalMs: 0,
    fetchFlushMs: 5,
  };
}

function newShare(clock: ManualClock, publicKey: Buffer = key) {
  return {
    code: generateShareCode(0, 1).canonical,
    publicKey,
    email: `user${randomBytes(4).toString('hex')}@example.org`,
    createdAt: clock.now(),
    expiresAt: clock.now() + 900_000,
    tokenHash: createHash('sha256').update(randomBytes(32)).digest(),
  };
}

/** `n` pending shares, written one after another (so their records follow in this order). */
async function fill(dir: string, clock: ManualClock, n: number): Promise<string[]> {
  const store = await ShareStore.open(options(dir, clock));
  const codes: string[] = [];
  for (let i = 0; i < n; i++) {
    const s = newShare(clock);
    await store.put(s);
    codes.push(s.code);
  }
  await store.close();
  return codes;
}

async function states(dir: string, clock: ManualClock, codes: string[], logger = new MemoryLogger()) {
  const store = await ShareStore.open(options(dir, clock, logger));
  const missing = codes.filter((c) => store.lookup(c).state !== 'pending');
  return { store, missing, logger };
}

/** Offset of the first occurrence of `code` (ASCII, inside its put_share record) in `bytes`. */
const where = (bytes: Buffer, code: string) => bytes.indexOf(Buffer.from(code, 'latin1'));

test('200 shares and one flipped bit in the middle: every share but the damaged one survives; the log and the store say what was skipped', async () => {
  const dir = tempDir('recover');
  const clock = new ManualClock();
  try {
    const codes = await fill(dir.path, clock, 200);
    const log = join(dir.path, 'store.log');
    const pristine = readFileSync(log);
    const bytes = Buffer.from(pristine);
    const mid = Math.floor(bytes.length / 2);
    bytes[mid]! ^= 0x10;
    writeFileSync(log, bytes);

    const { store, missing, logger } = await states(dir.path, clock, codes);
    assert.is(missing.length, 1, `lost: ${missing.join(', ')}\n${logger.text()}`);
    const range = store.recovery.skipped;
    assert.is(range.length, 1);
    assert.ok(
      range[0]!.from <= mid && mid < range[0]!.to,
      `the skipped range ${range[0]!.from}-${range[0]!.to} holds the flipped byte ${mid}`,
    );
    const lostAt = where(pristine, missing[0]!);
    assert.ok(range[0]!.from <= lostAt && lostAt < range[0]!.to, 'the lost share is the one whose record was damaged');
    assert.match(
      logger.text(),
      new RegExp(
        `WARN store: skipped 1 damaged range\\(s\\), ${range[0]!.to - range[0]!.from} of ${bytes.length} bytes, .*: ${range[0]!.from}-${range[0]!.to} \\(`,
      ),
    );
    assert.match(
      logger.text(),
      /kept every record outside them \(199\) and saved the damaged file as .*store\.log\.damaged-/,
    );
    assert.ok(readFileSync(store.recovery.damagedCopy!).equals(bytes), 'the damaged file is kept as it was');
    assert.ok(!existsSync(join(dir.path, 'store.log.repair')));

    const s = newShare(clock);
    await store.put(s);
    await store.close();
    const again = await states(dir.path, clock, [...codes.filter((c) => c !== missing[0]), s.code]);
    assert.is(again.missing.length, 0);
    assert.equal(again.store.recovery.skipped, [], 'the repaired log is clean');
    assert.is(again.store.recovery.damagedCopy, undefined);
    await again.store.close();
  } finally {
    dir.remove();
  }
});

test('one flipped bit anywhere in a record (length, stamp, payload, checksum, delimiter) costs at most that record', async () => {
  const dir = tempDir('recover');
  const clock = new ManualClock();
  try {
    const codes = await fill(dir.path, clock, 12);
    const log = join(dir.path, 'store.log');
    const pristine = readFileSync(log);
    // Record 6 runs from just after record 5's delimiter to its own delimiter (inclusive).
    const starts = [8];
    for (let at = pristine.indexOf(0, 8) + 1; at > 0 && at < pristine.length; at = pristine.indexOf(0, at) + 1)
      starts.push(at);
    assert.ok(starts.length >= 12, `${starts.length} records found by their delimiters`);
    const from = starts[5]!;
    const to = starts[6]!;
    for (let at = from; at < to; at++) {
      const bytes = Buffer.from(pristine);
      bytes[at]! ^= 1 << (at % 8);
      writeFileSync(log, bytes);
      for (const n of readdirSync(dir.path)) if (n.startsWith('store.log.damaged-')) rmSync(join(dir.path, n));
      const { store, missing, logger } = await states(dir.path, clock, codes);
      await store.close();
      const expected = at === to - 1 ? [] : [codes[5]];
      assert.equal(
        missing,
        expected,
        `bit ${at % 8} of byte ${at - from} of the record (${at === to - 1 ? 'its delimiter' : 'inside'}):\n${logger.text()}`,
      );
    }
  } finally {
    dir.remove();
  }
});

test('a flipped bit in the file header keeps every record; the header is rewritten', async () => {
  const dir = tempDir('recover');
  const clock = new ManualClock();
  try {
    const codes = await fill(dir.path, clock, 200);
    const log = join(dir.path, 'store.log');
    for (const at of [0, 5, 7]) {
      const bytes = readFileSync(log);
      bytes[at]! ^= 0x04;
      writeFileSync(log, bytes);
      const { store, missing, logger } = await states(dir.path, clock, codes);
      assert.is(missing.length, 0, logger.text());
      assert.equal(store.recovery.skipped, [{ from: 0, to: 8, reason: 'damaged file header' }]);
      assert.ok(!store.recovery.startedEmpty);
      assert.match(logger.text(), /skipped 1 damaged range\(s\), 8 of \d+ bytes, .*0-8 \(damaged file header\)/);
      await store.close();
      assert.ok(readFileSync(log).subarray(0, 8).equals(MAGIC_V2), 'the header is whole again');
    }
  } finally {
    dir.remove();
  }
});

test('a share whose put_share record was lost does not come back half-made from its later records', async () => {
  const dir = tempDir('recover');
  const clock = new ManualClock();
  try {
    let store = await ShareStore.open(options(dir.path, clock));
    const a = newShare(clock);
    await store.put(a);
    const before = readFileSync(join(dir.path, 'store.log')).length;
    await store.verify(a.tokenHash);
    const live = store.lookup(a.code);
    assert.is(live.state, 'live');
    if (live.state === 'live') store.recordFetch(live.share);
    await new Promise((r) => setTimeout(r, 30));
    const others = Array.from({ length: 5 }, () => newShare(clock));
    for (const s of others) await store.put(s);
    await store.close();

    const log = join(dir.path, 'store.log');
    const bytes = readFileSync(log);
    bytes[8 + Math.floor((before - 8) / 2)]! ^= 0x01; // inside a's put_share; its verify and fetch_count records follow intact
    writeFileSync(log, bytes);
    store = await ShareStore.open(options(dir.path, clock));
    assert.is(store.lookup(a.code).state, 'missing', 'neither live nor pending without its put_share');
    assert.is(store.findByToken(a.tokenHash), undefined);
    for (const s of others) assert.is(store.lookup(s.code).state, 'pending');
    assert.is(store.stats().sharesLive, 5);
    assert.is(store.stats().sharesPending, 5);
    await store.close();
  } finally {
    dir.remove();
  }
});

test("a record hidden inside a value (a publisher's key bytes) is never taken for a record when its own record is damaged", async () => {
  const dir = tempDir('recover');
  const clock = new ManualClock();
  try {
    let store = await ShareStore.open(options(dir.path, clock));
    const victim = newShare(clock);
    await store.put(victim);
    // The key carries a whole, checksummed verify record of the victim's code.
    const forged = encodeRecord({
      type: 'verify',
      stamp: { origin: 0, epoch: 9e12, seq: 1e9 },
      code: victim.code,
      verifiedAt: clock.now(),
    });
    const evilKey = Buffer.concat([Buffer.from([1]), forged, Buffer.alloc(64 - forged.length, 7)]);
    assert.is(evilKey.length, 65);
    const evil = newShare(clock, evilKey);
    const start = readFileSync(join(dir.path, 'store.log')).length;
    await store.put(evil);
    const after = Array.from({ length: 10 }, () => newShare(clock));
    for (const s of after) await store.put(s);
    await store.close();

    const log = join(dir.path, 'store.log');
    const bytes = readFileSync(log);
    bytes[start + 2]! ^= 0x20; // the evil record's length field
    writeFileSync(log, bytes);
    store = await ShareStore.open(options(dir.path, clock));
    assert.is(store.lookup(victim.code).state, 'pending', 'the forged verify was not applied');
    assert.is(store.lookup(evil.code).state, 'missing');
    for (const s of after) assert.is(store.lookup(s.code).state, 'pending');
    await store.close();
  } finally {
    dir.remove();
  }
});

/** A version 1 log (frames back to back) of `n` pending shares. */
function writeV1(path: string, clock: ManualClock, n: number): string[] {
  const codes: string[] = [];
  const parts: Buffer[] = [MAGIC_V1];
  for (let i = 0; i < n; i++) {
    const s = newShare(clock);
    const stamp = { origin: 0, epoch: 1, seq: i + 1 };
    const rec: StoreRecord = { type: 'putShare', stamp, share: { ...s, verifiedAt: 0, fetchCount: 0, stamp } };
    parts.push(encodeRecord(rec));
    codes.push(s.code);
  }
  writeFileSync(path, Buffer.concat(parts));
  return codes;
}

test('a version 1 log is read and rewritten as version 2; a damaged one keeps every intact record, header included', async () => {
  const dir = tempDir('recover');
  const clock = new ManualClock();
  try {
    const log = join(dir.path, 'store.log');
    let codes = writeV1(log, clock, 50);
    let logger = new MemoryLogger();
    let { store, missing } = await states(dir.path, clock, codes, logger);
    assert.is(missing.length, 0);
    assert.equal(store.recovery.skipped, []);
    assert.is(store.recovery.damagedCopy, undefined, 'a clean conversion keeps no copy');
    assert.match(logger.text(), /rewrote .*store\.log from store format 1 to 2/);
    assert.ok(store.stats().lastSequence >= 50);
    await store.close();
    assert.ok(readFileSync(log).subarray(0, 8).equals(MAGIC_V2));
    ({ store, missing } = await states(dir.path, clock, codes));
    assert.is(missing.length, 0);
    await store.close();

    codes = writeV1(log, clock, 50);
    const bytes = readFileSync(log);
    bytes[3]! ^= 0x01; // header
    bytes[Math.floor(bytes.length / 2)]! ^= 0x40;
    bytes[bytes.length - 30]! ^= 0x02;
    writeFileSync(log, bytes);
    logger = new MemoryLogger();
    ({ store, missing } = await states(dir.path, clock, codes, logger));
    assert.is(missing.length, 2, logger.text());
    assert.is(store.recovery.skipped.length, 3);
    assert.is(store.recovery.skipped[0]!.reason, 'damaged file header');
    await store.close();
    ({ store, missing } = await states(dir.path, clock, codes));
    assert.is(missing.length, 2);
    assert.equal(store.recovery.skipped, []);
    await store.close();
  } finally {
    dir.remove();
  }
});

test("resync-peer's read-only reader skips the damage as the server does", async () => {
  const dir = tempDir('recover');
  const clock = new ManualClock();
  try {
    const codes = await fill(dir.path, clock, 30);
    const log = join(dir.path, 'store.log');
    const bytes = readFileSync(log);
    bytes[Math.floor(bytes.length / 3)]! ^= 0x08;
    writeFileSync(log, bytes);
    copyFileSync(log, join(dir.path, 'copy'));
    const state = await readStateReadOnly(dir.path, 0);
    assert.is(state.records, 29);
    assert.match(state.skipped ?? '', /at offset \d+ \(\d+ bytes\)/);
    assert.ok(readFileSync(log).equals(readFileSync(join(dir.path, 'copy'))), 'nothing repaired');
    assert.is(codes.filter((c) => state.index.shares.get(c)).length, 29);
  } finally {
    dir.remove();
  }
});

test('a server started on a damaged log says in /v1/status what its start-up check skipped', async () => {
  const dir = tempDir('recover');
  const clock = new ManualClock(Date.now());
  try {
    const codes = await fill(dir.path, clock, 40);
    const log = join(dir.path, 'store.log');
    const bytes = readFileSync(log);
    bytes[Math.floor(bytes.length / 2)]! ^= 0x01;
    writeFileSync(log, bytes);
    const s = await startTestServer({ stateDir: dir.path });
    try {
      const j = (await http(`${s.url}/v1/status`, { headers: { Accept: 'application/json' } })).json();
      assert.is(j.shares_live, codes.length - 1);
      assert.is(j.store_skipped_ranges, 1);
      assert.is(j.store_skipped.length, 1);
      const { from, to, reason } = j.store_skipped[0];
      assert.is(j.store_skipped_bytes, to - from);
      assert.type(reason, 'string');
      assert.match(j.store_damaged_copy, /store\.log\.damaged-/);
      const bin = await status(s.url);
      assert.is(bin.store_skipped_ranges, 1);
      assert.is(bin.store_skipped_bytes, to - from);
      assert.match(
        s.logger.text(),
        new RegExp(`skipped 1 damaged range\\(s\\), ${to - from} of ${bytes.length} bytes`),
      );
    } finally {
      await s.stop();
    }
  } finally {
    dir.remove();
  }
});

test.run();
