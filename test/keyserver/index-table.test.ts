import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { randomBytes, randomInt } from 'node:crypto';
import type { ShareState } from '../../src/keyserver/store/records.js';
import { ShareIndex } from '../../src/keyserver/store/share-index.js';
import { CODE_WIDTH, KEY_WIDTH, ShareTable } from '../../src/keyserver/store/share-table.js';
import { collectGarbageNow } from '../../src/keyserver/settle-memory.js';
import { arrayBuffersKeptSince, arrayBuffersNow, lonePooledCopy } from './kept-memory.js';

function share(i: number, extra: Partial<ShareState> = {}): ShareState {
  return {
    code: `c${i.toString(36)}${randomBytes(3).toString('hex')}`,
    publicKey: randomBytes(KEY_WIDTH),
    email: `user-${i}-é@example.org`,
    createdAt: 1_893_456_000_000 + i,
    expiresAt: 1_893_456_900_000 + i,
    verifiedAt: i % 2 === 0 ? 0 : 1_893_456_100_000 + i,
    fetchCount: i % 2 === 0 ? 0 : randomInt(1, 2 ** 32 - 1),
    tokenHash: i % 2 === 0 ? randomBytes(32) : undefined,
    stamp: { origin: i % 32, epoch: 1_700_000_000_000 + i, seq: 2 ** 40 + i },
    ...extra,
  };
}

test('every field round-trips exactly, past several growths of the initial capacity', () => {
  const table = new ShareTable(4);
  const all: ShareState[] = [];
  for (let i = 0; i < 1000; i++) {
    const s = share(i);
    if (i % 3 === 0) s.fetchStamp = { origin: 7, epoch: 1_700_000_000_500 + i, seq: 99 + i };
    all.push(s);
    table.set(s);
  }
  assert.is(table.size, 1000);
  assert.ok(table.slotCapacity >= 1000 && table.slotCapacity <= 2048, `capacity ${table.slotCapacity}`);
  for (const s of all) assert.equal(table.get(s.code), s);
  assert.equal(new Set([...table.values()].map((s) => s.code)), new Set(all.map((s) => s.code)));
  assert.is(table.get('nope'), undefined);
});

test('keys and token hashes of unusual widths round-trip (side maps), and a key goes back to the slab on overwrite', () => {
  const table = new ShareTable(2);
  const cases = [
    share(1, { publicKey: randomBytes(255) }),
    share(2, { publicKey: Buffer.alloc(0) }),
    share(3, { publicKey: randomBytes(32) }),
    share(4, { tokenHash: randomBytes(20) }),
    share(5, { tokenHash: randomBytes(64) }),
    share(6, { tokenHash: Buffer.alloc(0) }),
  ];
  for (const s of cases) table.set(s);
  for (const s of cases) assert.equal(table.get(s.code), s);
  const narrowed = { ...cases[0]!, publicKey: randomBytes(KEY_WIDTH), tokenHash: randomBytes(32) };
  table.set(narrowed);
  assert.equal(table.get(narrowed.code), narrowed);
});

test('deleted slots are reused: churn at a steady size does not grow the table; a reused slot keeps nothing of its past', () => {
  const table = new ShareTable(64);
  let live: ShareState[] = [];
  for (let i = 0; i < 64; i++) {
    const s = share(i, { fetchStamp: { origin: 1, epoch: 2, seq: 3 }, publicKey: randomBytes(300) });
    live.push(s);
    table.set(s);
  }
  const old = table.get(live[0]!.code)!;
  for (let round = 0; round < 20; round++) {
    for (const s of live) assert.ok(table.delete(s.code));
    assert.not.ok(table.delete(live[0]!.code), 'deleted twice');
    live = live.map((_, j) => share(round * 1000 + j));
    for (const s of live) table.set(s);
  }
  assert.is(table.slotCapacity, 64);
  assert.is(table.size, 64);
  // New shares in reused slots: no stale fetch stamp, wide key or token hash.
  for (const s of live) assert.equal(table.get(s.code), s);
  // A copy handed out before its slot was reused does not change.
  assert.is(old.publicKey.length, 300);
  assert.equal(old.fetchStamp, { origin: 1, epoch: 2, seq: 3 });
});

test('copies are independent of the table; fetch counts and expiry scans go through the table', () => {
  const table = new ShareTable(8);
  const a = share(1);
  const b = share(2, { expiresAt: 50 });
  table.set(a);
  table.set(b);
  const copy = table.get(a.code)!;
  copy.publicKey.fill(0);
  copy.fetchCount = 12345;
  assert.equal(table.get(a.code), a);
  assert.ok(table.setFetchCount(a.code, 77, { origin: 3, epoch: 4, seq: 5 }));
  assert.not.ok(table.setFetchCount('missing', 1, { origin: 3, epoch: 4, seq: 5 }));
  assert.equal(table.get(a.code), { ...a, fetchCount: 77, fetchStamp: { origin: 3, epoch: 4, seq: 5 } });
  assert.equal(table.expiredCodes(50), [b.code]);
  assert.equal(table.expiredCodes(49), []);
  // A put without a fetch stamp replaces the whole share, the stamp included.
  table.set(a);
  assert.equal(table.get(a.code), a);
});

test('a snapshot is a cut: later writes, deletes, slot reuse and growth do not change what it yields', () => {
  const table = new ShareTable(4);
  const before = Array.from({ length: 4 }, (_, i) => share(i, i === 1 ? { publicKey: randomBytes(100) } : {}));
  for (const s of before) table.set(s);
  table.delete(before[3]!.code);
  const cut = table.snapshot();
  table.setFetchCount(before[0]!.code, 999, { origin: 9, epoch: 9, seq: 9 });
  table.set({ ...before[1]!, publicKey: randomBytes(65), email: 'changed@example.org' });
  table.delete(before[2]!.code);
  for (let i = 10; i < 20; i++) table.set(share(i)); // reuses the freed slots, then grows
  assert.equal([...cut], before.slice(0, 3));
});

test('a snapshot read while the table changes (copy on write) yields exactly the shares of the cut', () => {
  const table = new ShareTable(8);
  const live = new Map<string, ShareState>();
  const put = (x: ShareState) => {
    table.set(x);
    live.set(x.code, x);
  };
  for (let i = 0; i < 600; i++) put(share(i));
  for (const code of [...live.keys()].slice(0, 100)) {
    table.delete(code); // free slots at the cut, reused while the snapshot is read
    live.delete(code);
  }
  const atCut = [...table.values()];
  const cut = table.snapshot();
  assert.is(table.openSnapshots, 1);
  const got: ShareState[] = [];
  let n = 1000;
  for (const x of cut) {
    got.push(x);
    // Three changes per share read: new shares, rewrites (email churn moves the arena), fetch counts, deletes.
    for (let k = 0; k < 3; k++) {
      const codes = [...live.keys()];
      const pick = codes[randomInt(codes.length)]!;
      const op = randomInt(4);
      if (op === 0) put(share(n++));
      else if (op === 1)
        put({ ...live.get(pick)!, email: `moved-${n++}@example.org`, publicKey: randomBytes(KEY_WIDTH) });
      else if (op === 2) {
        const stamp = { origin: 1, epoch: 2, seq: n };
        table.setFetchCount(pick, n, stamp);
        live.set(pick, { ...live.get(pick)!, fetchCount: n++, fetchStamp: stamp });
      } else {
        table.delete(pick);
        live.delete(pick);
      }
    }
  }
  const byCode = (a: ShareState, b: ShareState) => (a.code < b.code ? -1 : 1);
  assert.equal(got.sort(byCode), atCut.sort(byCode));
  assert.is(table.openSnapshots, 0, 'a snapshot read to the end is closed');
  for (const [code, x] of live) assert.equal(table.get(code), x, 'the table itself kept every change');

  // Closed early (a compaction that failed before reading it): nothing is kept for it any more.
  const early = table.snapshot();
  const it = early[Symbol.iterator]();
  it.next();
  early.close();
  assert.is(table.openSnapshots, 0);
  table.delete([...live.keys()][0]!);
  assert.ok(it.next().done, 'a closed snapshot yields nothing more');
});

test('codes the code column cannot hold (too long, not ASCII, empty) round-trip and are found, deleted and reused like any other', () => {
  const table = new ShareTable(2);
  const odd = [
    share(1, { code: 'X'.repeat(CODE_WIDTH) }),
    share(2, { code: 'X'.repeat(CODE_WIDTH + 1) }),
    share(3, { code: 'CODÉ' }),
    share(4, { code: '' }),
    share(5, { code: '\u{1F511}KEY' }),
  ];
  for (const s of odd) table.set(s);
  for (const s of odd) assert.equal(table.get(s.code), s);
  assert.is(table.get('X'.repeat(CODE_WIDTH - 1)), undefined, 'a prefix is another code');
  assert.is(table.get('CODE'), undefined, 'no folding of accents');
  assert.ok(table.delete(odd[2]!.code));
  assert.is(table.get(odd[2]!.code), undefined);
  const narrow = share(6, { code: 'NARROW' });
  table.set(narrow); // takes the freed slot of the wide code
  assert.equal(table.get(narrow.code), narrow);
  assert.equal(
    new Set(table.expiredCodes(Number.MAX_VALUE)),
    new Set([odd[0]!, odd[1]!, odd[3]!, odd[4]!, narrow].map((s) => s.code)),
  );
});

test('emails: a changed email is stored anew, dead bytes are rewritten away, non-ASCII and very long ones round-trip', () => {
  const table = new ShareTable(16);
  const shares = Array.from({ length: 16 }, (_, i) => share(i, { email: `owner-${i}@example.org` }));
  for (const s of shares) table.set(s);
  const start = table.emailArenaBytes;
  for (const s of shares) table.set(s); // the same email: stays in place
  assert.is(table.emailArenaBytes, start);
  for (let round = 0; round < 6000; round++) {
    const i = round % 16;
    shares[i] = { ...shares[i]!, email: `owner-${i}-round-${round}-${'x'.repeat(round % 40)}@example.org` };
    table.set(shares[i]!);
  }
  for (const s of shares) assert.equal(table.get(s.code), s);
  // 6,000 changes wrote ~280 KB; the arena keeps only a bounded multiple of the ~1 KB alive.
  assert.ok(table.emailArenaBytes < (1 << 16) * 2, `arena ${table.emailArenaBytes} bytes`);
  const wide = [
    share(100, { email: `${'x'.repeat(70_000)}@example.org` }),
    share(101, { email: 'ünïcode@example.org' }),
    share(102, { email: '' }),
  ];
  for (const s of wide) table.set(s);
  for (const s of wide) assert.equal(table.get(s.code), s);
  // Back from the side map to the arena, and the other way.
  table.set({ ...wide[1]!, email: 'ascii@example.org' });
  table.set({ ...shares[0]!, email: 'wïde@example.org' });
  assert.is(table.get(wide[1]!.code)!.email, 'ascii@example.org');
  assert.is(table.get(shares[0]!.code)!.email, 'wïde@example.org');
});

test('hash table: 20,000 inserts and deletes in churn keep every live code findable and every deleted one gone', () => {
  const table = new ShareTable(8);
  const live = new Map<string, ShareState>();
  const gone = new Set<string>();
  for (let i = 0; i < 20_000; i++) {
    const s = share(i, { code: `K${i}` });
    table.set(s);
    live.set(s.code, s);
    if (i % 3 === 2) {
      // Delete an older one: leaves deleted entries in the probe chains of later codes.
      const victim = `K${i - 2}`;
      assert.ok(table.delete(victim));
      live.delete(victim);
      gone.add(victim);
    }
  }
  assert.is(table.size, live.size);
  for (const [code, s] of live) assert.equal(table.get(code), s);
  for (const code of gone) assert.not.ok(table.has(code));
  assert.equal(new Set([...table.values()].map((s) => s.code)), new Set(live.keys()));
  // Slots were reused: the table holds about as many slots as live shares, not as many as were ever set.
  assert.ok(table.slotCapacity <= 16_384, `capacity ${table.slotCapacity}`);
});

test('token hashes and wide keys kept for pending shares keep no 8 KiB Buffer pool slab alive', async () => {
  // A publish's token hash is a slice of node's Buffer pool; kept as it is, it would keep its slab
  // (8 KiB) for 32 bytes, for as long as the share is pending.
  const table = new ShareTable(16);
  const n = 1024;
  const before = arrayBuffersNow();
  for (let i = 0; i < n; i++)
    table.set(
      share(i, { tokenHash: lonePooledCopy(randomBytes(32)), publicKey: lonePooledCopy(randomBytes(KEY_WIDTH + 1)) }),
    );
  const kept = await arrayBuffersKeptSince(before, 1024 * 1024);
  assert.ok(kept < 1024 * 1024, `the table keeps ${kept} bytes of array buffers for ${n} pending shares`);
  assert.is(table.size, n);
});

test('pending shares are found by token hash; a confirmation takes it, a failed one puts it back; overwrites, deletes and slot reuse follow', () => {
  const table = new ShareTable(4);
  const pending = Array.from({ length: 3000 }, (_, i) => share(i * 2)); // even: pending, with a token hash
  for (const s of pending) table.set(s);
  assert.is(table.tokenCount, 3000);
  for (const s of pending) assert.is(table.codeOfToken(s.tokenHash!), s.code);
  assert.is(table.codeOfToken(randomBytes(32)), undefined);
  const [a, b, c] = pending as [ShareState, ShareState, ShareState];
  // A confirmation in flight: not found, still held by the share; taken once only.
  assert.ok(table.takeToken(a.tokenHash!));
  assert.not.ok(table.takeToken(a.tokenHash!));
  assert.is(table.codeOfToken(a.tokenHash!), undefined);
  assert.equal(table.get(a.code)!.tokenHash, a.tokenHash);
  table.restoreToken(a.code);
  table.restoreToken(a.code); // twice: no second entry
  assert.is(table.codeOfToken(a.tokenHash!), a.code);
  assert.is(table.tokenCount, 3000);
  // Verified (no token hash any more), then a new token hash over an old one, then deleted.
  table.set({ ...a, tokenHash: undefined, verifiedAt: 5 });
  assert.is(table.codeOfToken(a.tokenHash!), undefined);
  table.restoreToken(a.code); // no token hash: nothing to put back
  assert.is(table.codeOfToken(a.tokenHash!), undefined);
  const renewed = randomBytes(32);
  table.set({ ...b, tokenHash: renewed });
  assert.is(table.codeOfToken(b.tokenHash!), undefined);
  assert.is(table.codeOfToken(renewed), b.code);
  assert.ok(table.delete(c.code));
  assert.is(table.codeOfToken(c.tokenHash!), undefined);
  // A reused slot answers for its new token only; token hashes of other widths are found too.
  const odd = [share(1, { tokenHash: randomBytes(20) }), share(3, { tokenHash: Buffer.alloc(0) })];
  for (const s of odd) table.set(s);
  for (const s of odd) assert.is(table.codeOfToken(s.tokenHash!), s.code);
  assert.is(table.codeOfToken(c.tokenHash!), undefined);
  assert.is(table.tokenCount, 3000 - 2 + 2);
  // Every pending share confirmed: the token hash table shrinks back, and still finds what is left.
  for (const s of pending.slice(3)) table.set({ ...s, tokenHash: undefined, verifiedAt: 9 });
  assert.is(table.tokenCount, 3);
  assert.is(table.codeOfToken(renewed), b.code);
  for (const s of odd) assert.is(table.codeOfToken(s.tokenHash!), s.code);
  // Growth past the first capacity kept every token hash of a pending share (only those rows are copied).
  for (let i = 0; i < 5000; i++) table.set(share(10_001 + i * 2, { tokenHash: undefined, verifiedAt: 1 }));
  assert.is(table.codeOfToken(renewed), b.code);
  assert.equal(table.get(b.code)!.tokenHash, renewed);
});

test('pending shares cost no V8 heap of their own: 50,000 add under 16 bytes of heap each (their token hashes are in the table)', () => {
  // Kept in Maps of strings (a token hash -> code Map beside a slot -> token hash one), 100,000 pending
  // shares held about 25 MB of heap: the installed server's peak while publishing (issue 40).
  const index = new ShareIndex(0);
  const n = 50_000;
  const put = (s: ShareState, seq: number) =>
    index.apply({ type: 'putShare', stamp: { origin: 1, epoch: 1, seq }, share: s });
  // Warm-up: the columns grown past n shares and emptied again, so that the figure below counts what each share adds.
  // ASCII addresses: the email column holds them (a non-ASCII one goes to a side Map).
  const first = Array.from({ length: n }, (_, i) => share(2 * i, { email: `user-${i}@example.org` }));
  for (const [i, s] of first.entries()) put(s, i + 1);
  for (const s of first)
    index.apply({
      type: 'tombstone',
      stamp: { origin: 1, epoch: 2, seq: 1 },
      code: s.code,
      deletedAt: 1,
      expiresAt: 2,
      reason: 'expired',
    });
  first.length = 0;
  index.tombstones.clear();
  if (!collectGarbageNow()) throw new Error('this node does not run a full collection on request');
  const before = process.memoryUsage().heapUsed;
  for (let i = 0; i < n; i++) put(share(2 * i + 200_000, { email: `user-${i}@example.org` }), n + i + 1);
  collectGarbageNow();
  const perShare = (process.memoryUsage().heapUsed - before) / n;
  assert.is(index.pending, n);
  assert.ok(perShare < 16, `${perShare.toFixed(0)} bytes of heap per pending share`);
});

test.run();
