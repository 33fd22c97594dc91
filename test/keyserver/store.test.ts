import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, statSync, truncateSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { mkdirSync } from 'node:fs';
import { readStateReadOnly } from '../../src/keyserver/store/read-only.js';
import type { ShareState } from '../../src/keyserver/store/records.js';
import { ShareStore, type StoreOptions } from '../../src/keyserver/store/share-store.js';
import { generateShareCode } from '../../src/keyserver/share-code.js';
import { ManualClock, MemoryLogger, identityPublicKey, tempDir } from './harness.js';
import { waitFor } from './cluster.js';

const key = identityPublicKey();

function options(
  dir: string,
  clock: ManualClock,
  logger = new MemoryLogger(),
  extra: Partial<StoreOptions> = {},
): StoreOptions {
  return {
    dir,
    serverId: 0,
    originEpoch: 1,
    compactMinBytes: 1 << 30,
    clock,
    logger,
    sweepIntervalMs: 0,
    fetchFlushMs: 5,
    ...extra,
  };
}

function newShare(clock: ManualClock, ttl = 900_000) {
  const token = randomBytes(32);
  return {
    token,
    input: {
      code: generateShareCode(0, 1).canonical,
      publicKey: key,
      email: `user${randomBytes(4).toString('hex')}@example.org`,
      createdAt: clock.now(),
      expiresAt: clock.now() + ttl,
      tokenHash: createHash('sha256').update(token).digest(),
    },
  };
}

test('a put is durable, its token survives a restart, verification and fetch counts too', async () => {
  const dir = tempDir('store');
  const clock = new ManualClock();
  try {
    let store = await ShareStore.open(options(dir.path, clock));
    const a = newShare(clock);
    const b = newShare(clock);
    await store.put(a.input);
    await store.put(b.input);
    assert.is(store.lookup(a.input.code).state, 'pending');
    await store.close();

    store = await ShareStore.open(options(dir.path, clock));
    assert.is(store.lookup(a.input.code).state, 'pending');
    assert.ok(store.findByToken(a.input.tokenHash), 'token hash survived the restart');
    const verified = await store.verify(a.input.tokenHash);
    assert.ok(verified && verified.verifiedAt === clock.now());
    assert.is(await store.verify(a.input.tokenHash), undefined, 'tokens are single-use');
    const live = store.lookup(a.input.code);
    assert.is(live.state, 'live');
    if (live.state !== 'live') return;
    store.recordFetch(live.share);
    store.recordFetch(live.share);
    assert.is(store.recordFetch(live.share), 3);
    await store.close();

    store = await ShareStore.open(options(dir.path, clock));
    const again = store.lookup(a.input.code);
    assert.is(again.state, 'live');
    if (again.state === 'live') {
      assert.is(again.share.fetchCount, 3);
      assert.is(again.share.email, a.input.email);
      assert.ok(again.share.publicKey.equals(key));
      assert.is(again.share.tokenHash, undefined);
    }
    assert.is(store.lookup(b.input.code).state, 'pending');
    assert.is(store.findByToken(a.input.tokenHash), undefined);
    const stats = store.stats();
    assert.is(stats.sharesLive, 2);
    assert.is(stats.sharesPending, 1);
    assert.ok(stats.lastSequence >= 4, 'sequence numbers survive restarts');
    await store.close();
  } finally {
    dir.remove();
  }
});

test('fetch counts of many shares are written once a batch is full, before the window ends', async () => {
  // A window's counts are kept in memory until written: with many shares fetched once each (the
  // usual case: B fetches a key once), a long window would hold one entry per share fetched.
  const dir = tempDir('store-batch');
  const clock = new ManualClock();
  const batch = 8;
  try {
    const store = await ShareStore.open(
      options(dir.path, clock, undefined, { fetchFlushMs: 60_000, fetchFlushBatch: batch }),
    );
    const shares: ShareState[] = [];
    for (let i = 0; i < batch; i++) {
      const s = newShare(clock);
      await store.put(s.input);
      shares.push((await store.verify(s.input.tokenHash))!);
    }
    const onDisk = async () => {
      const state = await readStateReadOnly(dir.path, 0);
      return shares.map((s) => state.index.shares.get(s.code)?.fetchCount);
    };
    for (const s of shares.slice(0, -1)) store.recordFetch(s);
    await new Promise((r) => setTimeout(r, 200));
    assert.equal(await onDisk(), new Array(batch).fill(0), 'one short of a batch: nothing written within the window');
    store.recordFetch(shares.at(-1)!);
    let counts = await onDisk();
    for (let i = 0; i < 100 && counts.some((c) => c !== 1); i++) {
      await new Promise((r) => setTimeout(r, 50));
      counts = await onDisk();
    }
    assert.equal(counts, new Array(batch).fill(1), 'a full batch is written at once');
    await store.close();
  } finally {
    dir.remove();
  }
});

test('concurrent puts are group-committed: fewer fsync batches than records', async () => {
  const dir = tempDir('store');
  const clock = new ManualClock();
  try {
    const store = await ShareStore.open(options(dir.path, clock));
    const shares = Array.from({ length: 300 }, () => newShare(clock));
    await Promise.all(shares.map((s) => store.put(s.input)));
    const batches = (store as unknown as { writer: { batches: number } }).writer.batches;
    assert.ok(batches < 100, `${batches} batches for 300 records`);
    for (const s of shares) assert.is(store.lookup(s.input.code).state, 'pending');
    await store.close();
  } finally {
    dir.remove();
  }
});

test('two verifications of one token at once: exactly one succeeds', async () => {
  const dir = tempDir('store');
  const clock = new ManualClock();
  try {
    const store = await ShareStore.open(options(dir.path, clock));
    const s = newShare(clock);
    await store.put(s.input);
    const results = await Promise.all([
      store.verify(s.input.tokenHash),
      store.verify(s.input.tokenHash),
      store.verify(s.input.tokenHash),
    ]);
    assert.is(results.filter(Boolean).length, 1);
    await store.close();
  } finally {
    dir.remove();
  }
});

async function fillAndClose(dir: string, clock: ManualClock, n: number): Promise<string[]> {
  const store = await ShareStore.open(options(dir, clock));
  const codes: string[] = [];
  for (let i = 0; i < n; i++) {
    const s = newShare(clock);
    await store.put(s.input);
    codes.push(s.input.code);
  }
  await store.close();
  return codes;
}

test('a torn tail is cut at the last good record; the damaged file is kept aside', async () => {
  const dir = tempDir('store');
  const clock = new ManualClock();
  try {
    const codes = await fillAndClose(dir.path, clock, 20);
    const log = join(dir.path, 'store.log');
    const full = readFileSync(log);
    truncateSync(log, full.length - 7); // the last record loses its end
    const logger = new MemoryLogger();
    const store = await ShareStore.open(options(dir.path, clock, logger));
    for (const c of codes.slice(0, 19)) assert.is(store.lookup(c).state, 'pending', c);
    assert.is(store.lookup(codes[19]!).state, 'missing');
    assert.ok(store.recovery.damagedCopy, 'damaged copy recorded');
    assert.ok(
      readFileSync(store.recovery.damagedCopy!).equals(full.subarray(0, full.length - 7)),
      'the copy holds the damaged bytes',
    );
    assert.match(logger.text(), /torn record at the end/);
    const s = newShare(clock);
    await store.put(s.input); // appends after the cut, not after the garbage
    await store.close();
    const again = await ShareStore.open(options(dir.path, clock));
    assert.is(again.lookup(s.input.code).state, 'pending');
    assert.is(again.recovery.damagedCopy, undefined, 'the cut file is clean now');
    await again.close();
  } finally {
    dir.remove();
  }
});

test('a file that is not a store log starts an empty store, loudly, and is moved aside', async () => {
  const dir = tempDir('store');
  const clock = new ManualClock();
  try {
    writeFileSync(join(dir.path, 'store.log'), randomBytes(5000));
    const logger = new MemoryLogger();
    const store = await ShareStore.open(options(dir.path, clock, logger));
    assert.is(store.stats().sharesLive, 0);
    assert.ok(store.recovery.startedEmpty);
    assert.match(logger.text(), /ERROR STORE UNREADABLE: .* started an EMPTY store/);
    const aside = readdirSync(dir.path).filter((n) => n.startsWith('store.log.damaged-'));
    assert.is(aside.length, 1);
    assert.is(statSync(join(dir.path, aside[0]!)).size, 5000);
    await store.close();
  } finally {
    dir.remove();
  }
});

test('expired shares are tombstoned by the sweep and stay gone after a restart', async () => {
  const dir = tempDir('store');
  const clock = new ManualClock();
  try {
    const store = await ShareStore.open(options(dir.path, clock));
    const short = newShare(clock, 60_000);
    const long = newShare(clock, 3_600_000);
    await store.put(short.input);
    await store.put(long.input);
    clock.advance(60_000);
    assert.is(store.lookup(short.input.code).state, 'expired', 'expired even before the sweep');
    assert.is(store.findByToken(short.input.tokenHash), undefined, 'an expired share cannot be verified');
    assert.is(await store.sweep(), 1);
    assert.is(store.lookup(short.input.code).state, 'expired');
    assert.is(store.stats().sharesLive, 1);
    await store.close();
    const again = await ShareStore.open(options(dir.path, clock));
    assert.is(again.lookup(short.input.code).state, 'expired');
    assert.is(again.lookup(long.input.code).state, 'pending');
    clock.advance(2 * 3_600_000);
    await again.sweep();
    await again.sweep(); // the second sweep forgets tombstones older than the retention
    assert.is(again.lookup(short.input.code).state, 'missing');
    await again.close();
  } finally {
    dir.remove();
  }
});

test('compaction under load keeps every live share, drops expired ones, and survives a restart', async () => {
  const dir = tempDir('store');
  const clock = new ManualClock();
  try {
    const logger = new MemoryLogger();
    const store = await ShareStore.open(options(dir.path, clock, logger, { compactMinBytes: 16 * 1024 }));
    const doomed = newShare(clock, 60_000);
    await store.put(doomed.input);
    const live: string[] = [];
    const verified: string[] = [];
    for (let round = 0; round < 40; round++) {
      const batch = Array.from({ length: 25 }, () => newShare(clock));
      await Promise.all(
        batch.map(async (s) => {
          await store.put(s.input);
          live.push(s.input.code);
          if (live.length % 3 === 0) {
            await store.verify(s.input.tokenHash);
            verified.push(s.input.code);
            const l = store.lookup(s.input.code);
            if (l.state === 'live') store.recordFetch(l.share);
          }
        }),
      );
      if (round === 2) clock.advance(60_000); // `doomed` expires
    }
    // The fetch counts are written a few ms later (fetchFlushMs); one that
    // lands after the compaction's cut goes to the new log and grows it past
    // newSize, so wait until every count is durable (the index holds it).
    await waitFor(
      'the fetch counts to be written',
      () =>
        verified.every((c) => {
          const l = store.lookup(c);
          return l.state === 'live' && l.share.fetchCount === 1;
        }),
      10_000,
    );
    const before = store.stats().storeBytes;
    const final = await store.compact();
    assert.ok(final, 'final compaction ran');
    assert.is(final!.shares, live.length, 'every live share rewritten, the expired one dropped');
    assert.ok(final!.newSize < before, `compaction shrank the log: ${before} -> ${final!.newSize}`);
    assert.ok(store.compactions >= 2, `${store.compactions} compactions\n${logger.text()}`);
    assert.match(logger.text(), /store: compacted \d+ -> \d+ bytes/);
    for (const c of live) assert.ok(store.lookup(c).state !== 'missing', c);
    for (const c of verified) assert.is(store.lookup(c).state, 'live', c);
    await new Promise((r) => setTimeout(r, 20));
    await store.close();
    assert.ok(!existsSync(join(dir.path, 'store.log.compact')));

    const again = await ShareStore.open(options(dir.path, clock));
    for (const c of live) assert.ok(again.lookup(c).state !== 'missing', `after restart: ${c}`);
    for (const c of verified) {
      const l = again.lookup(c);
      assert.is(l.state, 'live');
      if (l.state === 'live') assert.is(l.share.fetchCount, 1);
    }
    assert.is(again.lookup(doomed.input.code).state, 'missing', 'expired share dropped by compaction');
    assert.is(again.stats().sharesLive, live.length);
    assert.is(again.stats().storeBytes, final!.newSize);
    await again.close();
  } finally {
    dir.remove();
  }
});

test('records appended while a compaction runs are carried over into the new log', async () => {
  const dir = tempDir('store');
  const clock = new ManualClock();
  try {
    const store = await ShareStore.open(options(dir.path, clock));
    const before = Array.from({ length: 500 }, () => newShare(clock));
    await Promise.all(before.map((s) => store.put(s.input)));
    const during = Array.from({ length: 200 }, () => newShare(clock));
    const compaction = store.compact(); // takes its cut synchronously, then writes in the background
    const puts = Promise.all(during.map((s) => store.put(s.input)));
    const [result] = await Promise.all([compaction, puts]);
    assert.ok(result, 'compaction finished');
    assert.is(result!.shares, 500, 'the cut held the first 500');
    assert.ok(result!.tailBytes > 0, 'records appended during compaction were copied as the tail');
    const extra = newShare(clock);
    await store.put(extra.input); // appended to the new file
    await store.close();
    const again = await ShareStore.open(options(dir.path, clock));
    for (const s of [...before, ...during, extra]) assert.is(again.lookup(s.input.code).state, 'pending');
    assert.is(again.stats().sharesLive, 701);
    await again.close();
  } finally {
    dir.remove();
  }
});

test('the state directory is locked; a lock left by a dead process is taken over', async () => {
  const dir = tempDir('store');
  const clock = new ManualClock();
  try {
    const store = await ShareStore.open(options(dir.path, clock));
    try {
      await ShareStore.open(options(dir.path, clock));
      assert.unreachable('second open succeeded');
    } catch (err) {
      assert.is((err as { code?: string }).code, 'STATE_DIR_LOCKED');
    }
    await store.close();
    const dead = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))'], { encoding: 'utf8' });
    writeFileSync(join(dir.path, 'lock'), `${dead.stdout}\n`);
    const again = await ShareStore.open(options(dir.path, clock));
    const lock = readFileSync(join(dir.path, 'lock'), 'utf8').trim().split(' ');
    assert.is(lock[0], String(process.pid));
    if (process.platform === 'linux') assert.is(lock.length, 3, 'pid, start time and boot id');
    await again.close();
    assert.ok(!existsSync(join(dir.path, 'lock')));
    assert.is(statSync(dir.path).mode & 0o777, 0o700);
    assert.is(statSync(join(dir.path, 'store.log')).mode & 0o777, 0o600);
  } finally {
    dir.remove();
  }
});

test('a lock whose pid now belongs to another process (reboot, container) is taken over; a live holder is not', async () => {
  if (process.platform !== 'linux') return;
  const dir = tempDir('store');
  const clock = new ManualClock();
  const other = spawn('sleep', ['30'], { stdio: 'ignore' });
  try {
    await once(other, 'spawn');
    const stat = readFileSync(`/proc/${other.pid}/stat`, 'utf8');
    const start = stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19];
    const boot = readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim();
    const lockPath = join(dir.path, 'lock');
    // The holder runs (same pid, start time and boot): refused, with the old pid-only format too.
    for (const text of [`${other.pid} ${start} ${boot}\n`, `${other.pid}\n`]) {
      mkdirSync(dir.path, { recursive: true });
      writeFileSync(lockPath, text);
      try {
        await ShareStore.open(options(dir.path, clock));
        assert.unreachable(`opened over a live holder (${text.trim()})`);
      } catch (err) {
        assert.is((err as { code?: string }).code, 'STATE_DIR_LOCKED');
      }
    }
    // The same pid, but another process: an earlier start time, or another boot.
    for (const text of [`${other.pid} 1 ${boot}\n`, `${other.pid} ${start} 00000000-0000-0000-0000-000000000000\n`]) {
      writeFileSync(lockPath, text);
      const store = await ShareStore.open(options(dir.path, clock));
      assert.is(readFileSync(lockPath, 'utf8').split(' ')[0], String(process.pid), `took over ${text.trim()}`);
      await store.close();
    }
  } finally {
    other.kill('SIGKILL');
    dir.remove();
  }
});

test.run();
