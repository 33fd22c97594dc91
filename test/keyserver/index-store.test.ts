import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { createHash, randomBytes } from 'node:crypto';
import { ShareStore, type Lookup, type StoreOptions } from '../../src/keyserver/store/share-store.js';
import type { ShareState } from '../../src/keyserver/store/records.js';
import { generateShareCode } from '../../src/keyserver/share-code.js';
import { ManualClock, MemoryLogger, tempDir } from './harness.js';

const SHARES = 100_000;

function options(dir: string, clock: ManualClock): StoreOptions {
  return {
    dir,
    serverId: 0,
    originEpoch: 1_700_000_000_000,
    compactMinBytes: 1 << 30,
    clock,
    logger: new MemoryLogger(),
    sweepIntervalMs: 0,
    fetchFlushMs: 5,
  };
}

const shareOf = (l: Lookup): ShareState | undefined =>
  l.state === 'live' || l.state === 'pending' ? l.share : undefined;

/** Every share held, by code, with every field (stamps included). */
function snapshot(store: ShareStore, codes: string[]): Map<string, ShareState | string> {
  return new Map(
    codes.map((c) => {
      const l = store.lookup(c);
      return [c, shareOf(l) ?? l.state];
    }),
  );
}

function assertSame(
  actual: Map<string, ShareState | string>,
  expected: Map<string, ShareState | string>,
  when: string,
): void {
  assert.is(actual.size, expected.size);
  let checked = 0;
  for (const [code, want] of expected) {
    // One assert per share would be slow; compare, and report the first difference in full.
    const got = actual.get(code);
    if (JSON.stringify(got) !== JSON.stringify(want)) assert.equal(got, want, `${when}: ${code}`);
    checked++;
  }
  assert.is(checked, expected.size);
}

test(`${SHARES} shares: every field exact after a restart and after compaction + restart; expired slots reused`, async () => {
  const dir = tempDir('index');
  const clock = new ManualClock();
  try {
    let store = await ShareStore.open(options(dir.path, clock));
    const codes: string[] = [];
    const model = new Map<string, { publicKey: Buffer; email: string; tokenHash: Buffer; expiresAt: number }>();
    for (let done = 0; done < SHARES; done += 1000) {
      await Promise.all(
        Array.from({ length: 1000 }, async (_, j) => {
          const i = done + j;
          let code = generateShareCode(0, 1).canonical;
          while (store.has(code)) code = generateShareCode(0, 1).canonical;
          // Keys of three widths: the usual 65 bytes, shorter, and wider than the slab column.
          const publicKey = randomBytes(i % 10 === 0 ? 91 : i % 10 === 1 ? 32 : 65);
          const tokenHash = createHash('sha256').update(randomBytes(32)).digest();
          const email = `u${i}-${randomBytes(3).toString('hex')}@exämple.org`;
          const expiresAt = clock.now() + (i % 50 === 0 ? 60_000 : 3_600_000);
          model.set(code, { publicKey, email, tokenHash, expiresAt });
          codes.push(code);
          await store.put({ code, publicKey, email, createdAt: clock.now(), expiresAt, tokenHash });
          if (i % 4 !== 0) await store.verify(tokenHash);
          for (let k = 0; i % 7 === 0 && k <= i % 3; k++) {
            const l = store.lookup(code);
            if (l.state === 'live') store.recordFetch(l.share);
          }
        }),
      );
    }
    // Fetch counts are written after a 50 ms timer and applied once durable: wait for them to land
    // (a fixed 50 ms wait was too short in a whole CI run at load 26), with a bound.
    const wantCount = (i: number) => (i % 7 === 0 && i % 4 !== 0 ? (i % 3) + 1 : 0);
    const landed = () => codes.every((c, i) => (shareOf(store.lookup(c))?.fetchCount ?? 0) === wantCount(i));
    for (const deadline = Date.now() + 30_000; !landed() && Date.now() < deadline; )
      await new Promise((r) => setTimeout(r, 50));
    const expected = snapshot(store, codes);
    // The fields against what was written, not only against themselves.
    codes.forEach((code, i) => {
      const s = expected.get(code) as ShareState;
      const m = model.get(code)!;
      assert.ok(s.publicKey.equals(m.publicKey) && s.email === m.email && s.expiresAt === m.expiresAt, code);
      assert.is(s.verifiedAt === 0, i % 4 === 0, `verification of ${code}`);
      assert.ok(i % 4 === 0 ? s.tokenHash!.equals(m.tokenHash) : s.tokenHash === undefined, `token hash of ${code}`);
      assert.is(s.fetchCount, wantCount(i), `fetch count of ${code}`);
    });
    await store.close();

    store = await ShareStore.open(options(dir.path, clock));
    assertSame(snapshot(store, codes), expected, 'after restart');

    // Expire 2% and sweep: their slots are then reused by new shares, which must not inherit anything.
    clock.advance(60_000);
    assert.is(await store.sweep(), SHARES / 50);
    for (const [code, m] of model) if (m.expiresAt <= clock.now()) expected.set(code, 'expired');
    const fresh: string[] = [];
    for (let i = 0; i < SHARES / 50; i++) {
      let code = generateShareCode(0, 1).canonical;
      while (store.has(code)) code = generateShareCode(0, 1).canonical;
      await store.put({
        code,
        publicKey: randomBytes(65),
        email: `n${i}@example.org`,
        createdAt: clock.now(),
        expiresAt: clock.now() + 600_000,
        tokenHash: randomBytes(32),
      });
      fresh.push(code);
    }
    for (const code of fresh) {
      const s = shareOf(store.lookup(code))!;
      assert.ok(
        s.verifiedAt === 0 && s.fetchCount === 0 && s.fetchStamp === undefined && s.tokenHash?.length === 32,
        code,
      );
      expected.set(code, s);
    }
    const all = [...codes, ...fresh];
    assert.is(store.stats().sharesLive, SHARES);
    const compacted = await store.compact();
    assert.ok(compacted, 'compaction ran');
    assertSame(snapshot(store, all), expected, 'after compaction');
    await store.close();

    store = await ShareStore.open(options(dir.path, clock));
    assertSame(snapshot(store, all), expected, 'after compaction and restart');
    await store.close();
  } finally {
    dir.remove();
  }
});

test.run();
