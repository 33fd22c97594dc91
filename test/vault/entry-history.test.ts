/**
 * Entry history (issue 27, item 7): the history block of the body codec
 * (round trip, and authentic-but-malformed blocks refused), and what every
 * write path of the library does with it: private writes, the cap, rm and
 * purge, rename, and shared containers (members see it, merge unites it).
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import {
  decodeBody,
  encodeBody,
  changeTime,
  historyOf,
  PAD_BLOCK,
  withChangeTimes,
  withHistory,
  type Entries,
} from '../../src/vault/container-body.js';
import { applyChanges } from '../../src/vault/entry-history.js';
import { historyBlockSize, MAX_HISTORY_KEEP, type History } from '../../src/vault/history-block.js';
import {
  createContainer,
  MAX_VALUE_BYTES,
  readEntries,
  unwrapContentKey,
  updateEntries,
  wipe,
  wipeEntries,
} from '../../src/vault/index.js';
import { renameContainer } from '../../src/vault/containers.js';
import {
  mergeShared,
  openSharedContentKey,
  shareContainer,
  unshareContainer,
  readSharedEntries,
  updateSharedEntries,
} from '../../src/vault/sharing/index.js';
import { diverge, read, threeMembers, write } from './sharing-people.js';
import { cleanup, expectCode, newVault } from './vault-fixture.js';

test.after.each(cleanup);

const b = (s: string) => Buffer.from(s);
const text = (h: History, name: string) => (h.get(name) ?? []).map((v) => Buffer.from(v.value).toString());

/** A padded body plaintext: count, raw entry/block bytes, zero padding. */
function body(count: number, parts: Buffer[]): Buffer {
  const head = Buffer.alloc(4);
  head.writeUInt32LE(count);
  const raw = Buffer.concat([head, ...parts]);
  return Buffer.concat([raw, Buffer.alloc(Math.ceil((raw.length + 1) / PAD_BLOCK) * PAD_BLOCK - raw.length)]);
}

function u32(n: number): Buffer {
  const x = Buffer.alloc(4);
  x.writeUInt32LE(n);
  return x;
}

function u64(n: bigint): Buffer {
  const x = Buffer.alloc(8);
  x.writeBigUInt64LE(n);
  return x;
}

/** One version: changed at, replaced at, value (declared length may lie). */
function version(value: Buffer, changedAt = 1n, replacedAt = 2n, declared = value.length): Buffer {
  return Buffer.concat([u64(changedAt), u64(replacedAt), u32(declared), value]);
}

/** A history block: tag 2, length (declared may lie), name count, names. */
function block(names: Array<[string, Buffer[]]>, opts: { count?: number; length?: number; k?: number } = {}): Buffer {
  const content = Buffer.concat([
    u32(opts.count ?? names.length),
    ...names.map(([n, vs]) =>
      Buffer.concat([Buffer.from([n.length]), b(n), Buffer.from([opts.k ?? vs.length]), ...vs]),
    ),
  ]);
  return Buffer.concat([Buffer.from([2]), u32(opts.length ?? content.length), content]);
}

function entry(name: string, value: Buffer): Buffer {
  return Buffer.concat([Buffer.from([name.length]), b(name), u32(value.length), value]);
}

test('codec: the history block round-trips after the entries and times; an old body has none', () => {
  const source = decodeBody(encodeBody(new Map([['A', b('1')]])), 'x');
  const next = withChangeTimes(
    new Map([
      ['A', b('1')],
      ['B', b('22')],
    ]),
    source,
    ['B'],
    1_700_000_000_000,
  );
  const history = new Map([
    [
      'A',
      [
        { value: b('old-a'), changedAt: 5, replacedAt: 9 },
        { value: b(''), changedAt: 0, replacedAt: 4 },
      ],
    ],
    ['GONE', [{ value: b('removed'), changedAt: 7, replacedAt: 8 }]],
  ]);
  const plain = encodeBody(withHistory(next, history));
  const afterTimes = 9 + 8 + 9 + (1 + 16); // the version-2 head, then u16 name lengths
  assert.is(plain[afterTimes], 2, 'the history tag follows the change times');
  assert.is(plain.readUInt32LE(afterTimes + 1), historyBlockSize(history) - 5, 'its length field');
  const back = decodeBody(plain, 'x');
  assert.equal([...back.keys()], ['A', 'B'], 'a name with only a history is no entry');
  const h = historyOf(back);
  assert.equal([...h.keys()], ['A', 'GONE']);
  assert.equal(text(h, 'A'), ['old-a', '']);
  assert.equal(
    h.get('A')!.map((v) => [v.changedAt, v.replacedAt]),
    [
      [5, 9],
      [0, 4],
    ],
  );
  assert.equal(text(h, 'GONE'), ['removed']);
  // Zero entries, a history only: no times block, the history right after the count.
  const only = encodeBody(withHistory(new Map(), new Map([['X', [{ value: b('x'), changedAt: 1, replacedAt: 2 }]]])));
  assert.is(only[4], 2);
  assert.equal(text(historyOf(decodeBody(only, 'x')), 'X'), ['x']);
  // The body of the previous release (entries, times, padding) reads with an empty history.
  assert.is(historyOf(decodeBody(body(1, [entry('A', b('1')), Buffer.from([1]), u64(3n)]), 'x')).size, 0);
  wipeEntries(source);
  wipeEntries(back);
});

test('codec: malformed history blocks are CONTAINER_CORRUPT with a specific reason', () => {
  const ok = version(b('v'));
  const cases: Array<[string, Buffer, RegExp]> = [
    [
      'tag with no length',
      body(0, [Buffer.from([2])]).subarray(0, PAD_BLOCK),
      /truncated history block|history block length past the end/,
    ],
    [
      'block length past the end of the body',
      body(0, [block([['A', [ok]]], { length: 5000 })]),
      /history block length past the end/,
    ],
    [
      'block cut short: the name count claims more names',
      body(0, [block([['A', [ok]]], { count: 2 })]),
      /truncated history block/,
    ],
    [
      'a value length past the block',
      body(0, [block([['A', [version(b('v'), 1n, 2n, 300)]]])]),
      /history value length out of range/,
    ],
    [
      'a value over 64 KiB',
      body(0, [block([['A', [version(Buffer.alloc(MAX_VALUE_BYTES + 1))]]])]),
      /history value length out of range/,
    ],
    [
      'a version count over the cap',
      body(0, [block([['A', [ok]]], { k: MAX_HISTORY_KEEP + 1 })]),
      /holds 101 versions/,
    ],
    ['a version count of zero', body(0, [block([['A', []]])]), /holds 0 versions/],
    [
      'names out of order',
      body(0, [
        block([
          ['B', [ok]],
          ['A', [ok]],
        ]),
      ]),
      /history names out of order/,
    ],
    [
      'a name twice',
      body(0, [
        block([
          ['A', [ok]],
          ['A', [ok]],
        ]),
      ]),
      /history names out of order or repeated/,
    ],
    ['an invalid name', body(0, [block([['1A', [ok]]])]), /invalid entry name in the history/],
    ['a time past 2^53', body(0, [block([['A', [version(b('v'), 1n << 60n)]]])]), /history time out of range/],
    [
      'bytes left over inside the block',
      body(0, [block([['A', [ok]]], { length: 4 + 1 + 1 + 1 + ok.length + 3 })]),
      /does not match its content/,
    ],
    ['too many names', body(0, [block([], { count: 5000 })]), /too many names in the history/],
    [
      'an unknown block after the history',
      body(0, [block([['A', [ok]]]), Buffer.from([3])]),
      /unknown block \(tag 3\)/,
    ],
    [
      'non-zero padding after the history',
      (() => {
        const x = body(0, [block([['A', [ok]]])]);
        x[x.length - 1] = 9;
        return x;
      })(),
      /non-zero padding/,
    ],
  ];
  for (const [what, plain, why] of cases) {
    const e = expectCode(() => decodeBody(plain, '/v/containers/x.stash'), 'CONTAINER_CORRUPT', what);
    assert.match(e.message, /\/v\/containers\/x\.stash/, what);
    assert.match(e.message, why, what);
  }
});

test('codec: history is what fits in 1 MiB, oldest versions dropped first; the entries always fit', () => {
  const big = (c: string) => Buffer.alloc(MAX_VALUE_BYTES, c);
  const entries = new Map<string, Uint8Array>();
  for (let i = 0; i < 14; i++) entries.set(`E${i}`, big('e'));
  const history = new Map([
    ['E0', Array.from({ length: 3 }, (_, i) => ({ value: big(String(i)), changedAt: 1, replacedAt: 100 - i }))],
  ]);
  const back = decodeBody(encodeBody(withHistory(entries, history)), 'x');
  assert.equal(
    text(historyOf(back), 'E0').map((s) => s[0]),
    ['0'],
    '14 x 64 KiB of entries leave room for one 64 KiB version (not two): the newest',
  );
  wipeEntries(back);
});

/** A private container `c` with the value of K set to each of `values` in turn. */
async function privateWith(values: string[], keep = 10): Promise<{ dir: string; key: Buffer; entries: () => Entries }> {
  const v = await newVault();
  createContainer(v.dir, v.key, 'c');
  const key = unwrapContentKey(v.dir, v.key, 'c');
  for (const value of values) updateEntries(v.dir, 'c', key, new Map([['K', b(value)]]), { keep });
  return { dir: v.dir, key, entries: () => readEntries(v.dir, 'c', key) };
}

test('private writes: each set keeps the value it replaced, newest first, with its times; the cap holds', async () => {
  const t0 = Date.now();
  const c = await privateWith(['one', 'two', 'three']);
  let e = c.entries();
  assert.is(e.get('K')!.toString(), 'three');
  assert.equal(text(historyOf(e), 'K'), ['two', 'one']);
  const [v1, v2] = historyOf(e).get('K')!;
  assert.ok(v2!.changedAt >= t0 && v2!.replacedAt === v1!.changedAt, 'one was replaced when two was set');
  wipeEntries(e);
  // Setting the same value again is no change and keeps no copy.
  assert.equal(updateEntries(c.dir, 'c', c.key, new Map([['K', b('three')]])), []);
  // keep 2: a fourth value drops the oldest.
  updateEntries(c.dir, 'c', c.key, new Map([['K', b('four')]]), { keep: 2 });
  e = c.entries();
  assert.equal(text(historyOf(e), 'K'), ['three', 'two']);
  wipeEntries(e);
  // keep 0: the next write keeps nothing, and drops what was kept.
  updateEntries(c.dir, 'c', c.key, new Map([['OTHER', b('x')]]), { keep: 0 });
  e = c.entries();
  assert.is(historyOf(e).size, 0);
  wipeEntries(e);
  expectCode(
    () => updateEntries(c.dir, 'c', c.key, new Map([['K', b('x')]]), { keep: 101 }),
    'INVALID_ARGUMENT',
    'keep over the cap',
  );
  expectCode(
    () => updateEntries(c.dir, 'c', c.key, new Map([['K', b('x')]]), { keep: -1 }),
    'INVALID_ARGUMENT',
    'negative keep',
  );
  wipe(c.key);
});

test('rm keeps the history (the removed value first); purge drops it; rename carries it', async () => {
  const c = await privateWith(['one', 'two']);
  assert.equal(updateEntries(c.dir, 'c', c.key, new Map([['K', null]])), ['K']);
  let e = c.entries();
  assert.not.ok(e.has('K'));
  assert.equal(text(historyOf(e), 'K'), ['two', 'one']);
  wipeEntries(e);
  // Another write keeps the removed entry's history.
  updateEntries(c.dir, 'c', c.key, new Map([['OTHER', b('x')]]));
  e = c.entries();
  assert.equal(text(historyOf(e), 'K'), ['two', 'one']);
  wipeEntries(e);
  // A rename rewrites the file under the new name: history included.
  const v = await newVault();
  createContainer(v.dir, v.key, 'r');
  const rk = unwrapContentKey(v.dir, v.key, 'r');
  updateEntries(v.dir, 'r', rk, new Map([['K', b('a')]]));
  updateEntries(v.dir, 'r', rk, new Map([['K', b('b')]]));
  renameContainer(v.dir, v.key, 'r', 'r2');
  e = readEntries(v.dir, 'r2', rk);
  assert.equal(text(historyOf(e), 'K'), ['a']);
  wipeEntries(e);
  wipe(rk);
  // purge of a name that only has a history drops it; of an unknown name changes nothing.
  assert.equal(updateEntries(c.dir, 'c', c.key, new Map(), { keep: 10, purge: ['K'] }), ['K']);
  assert.equal(updateEntries(c.dir, 'c', c.key, new Map(), { keep: 10, purge: ['NOPE'] }), []);
  e = c.entries();
  assert.is(historyOf(e).has('K'), false);
  wipeEntries(e);
  expectCode(() => updateEntries(c.dir, 'c', c.key, new Map(), { keep: 10, purge: ['bad name'] }), 'INVALID_NAME');
  wipe(c.key);
});

test('applyChanges: rm --purge removes the value and the history in one write', async () => {
  const c = await privateWith(['one', 'two']);
  const e = c.entries();
  const { next, changed } = applyChanges(e, new Map([['K', null]]), { keep: 10, purge: ['K'] });
  assert.equal(changed, ['K']);
  assert.is(next.has('K'), false);
  assert.is(historyOf(next).has('K'), false);
  wipeEntries(e);
  wipe(c.key);
});

test('applyChanges: a move within the container takes the history to the new name, and leaves no copy behind', async () => {
  const c = await privateWith(['one', 'two']);
  const e = c.entries();
  const { next, changed } = applyChanges(
    e,
    new Map([
      ['K', null],
      ['L', Buffer.from(e.get('K')!)],
    ]),
    { keep: 10, moves: [['K', 'L']] },
  );
  assert.equal(changed.sort(), ['K', 'L']);
  assert.equal([next.has('K'), Buffer.from(next.get('L')!).toString()], [false, 'two']);
  assert.equal([historyOf(next).has('K'), text(historyOf(next), 'L')], [false, ['one']]);
  expectCode(() => applyChanges(e, new Map(), { keep: 10, moves: [['K', 'no good']] }), 'INVALID_NAME');
  // The source changed after the move read it: its newer value is not lost but kept in its history.
  const raced = applyChanges(
    e,
    new Map([
      ['K', null],
      ['L', Buffer.from('stale')],
    ]),
    { keep: 10, moves: [['K', 'L']] },
  );
  assert.equal(Buffer.from(raced.next.get('L')!).toString(), 'stale');
  assert.equal(text(historyOf(raced.next), 'K'), ['two', 'one']);
  wipeEntries(e);
  wipe(c.key);
});

/** Shared container `team` entries and history as Bob (a member) reads them. */
function sharedAs(p: Awaited<ReturnType<typeof threeMembers>>['bob'], fn: (e: Entries) => void): void {
  const key = openSharedContentKey(p.dir, 'team', p.secret);
  try {
    const e = readSharedEntries(p.dir, 'team', key);
    try {
      fn(e);
    } finally {
      wipeEntries(e);
    }
  } finally {
    wipe(key);
  }
}

test('shared: a member sees the history other members wrote; share and unshare keep it', async () => {
  const { alice, bob } = await threeMembers();
  write(alice, 'team', 'A', 'beta');
  write(bob, 'team', 'A', 'gamma');
  sharedAs(bob, (e) => assert.equal(text(historyOf(e), 'A'), ['beta', 'alpha']));
  sharedAs(alice, (e) => assert.equal(text(historyOf(e), 'A'), ['beta', 'alpha']));
  // rm as a shared write keeps the history; purge drops it.
  const key = openSharedContentKey(bob.dir, 'team', bob.secret);
  updateSharedEntries(bob.dir, 'team', key, new Map([['A', null]]), bob.secret, { keep: 10 });
  sharedAs(alice, (e) => assert.equal(text(historyOf(e), 'A'), ['gamma', 'beta', 'alpha']));
  updateSharedEntries(bob.dir, 'team', key, new Map(), bob.secret, { keep: 10, purge: ['A'] });
  wipe(key);
  sharedAs(alice, (e) => assert.is(historyOf(e).size, 0));
});

test('share: a person added to a container gets no values replaced before they joined (private conversion and a new member)', async () => {
  const { alice, bob, carol } = await threeMembers();
  // A new member: team holds alpha, beta, gamma of A when carol is added again after unshare.
  write(alice, 'team', 'A', 'beta');
  write(alice, 'team', 'A', 'gamma');
  sharedAs(alice, (e) => assert.equal(text(historyOf(e), 'A'), ['beta', 'alpha']));
  unshareContainer(alice.dir, alice.key, 'team', [carol.pub]);
  write(alice, 'team', 'A', 'delta');
  shareContainer(alice.dir, alice.key, 'team', [carol.pub]);
  sharedAs(bob, (e) => {
    assert.is(Buffer.from(e.get('A')!).toString(), 'delta');
    assert.is(historyOf(e).size, 0);
    assert.ok(changeTime(e, 'A') > 0, 'the change time stays');
  });
  // A private container with history, converted by share: the members get its current values only.
  createContainer(alice.dir, alice.key, 'solo');
  for (const v of ['one', 'two', 'three']) {
    const ck = unwrapContentKey(alice.dir, alice.key, 'solo');
    updateEntries(alice.dir, 'solo', ck, new Map([['S', b(v)]]), { keep: 10 });
    wipe(ck);
  }
  shareContainer(alice.dir, alice.key, 'solo', [bob.pub]);
  const key = openSharedContentKey(alice.dir, 'solo', alice.secret);
  const e = readSharedEntries(alice.dir, 'solo', key);
  wipe(key);
  assert.is(Buffer.from(e.get('S')!).toString(), 'three');
  assert.is(historyOf(e).size, 0);
  wipeEntries(e);
});

test('merge: the histories of both sides are united, and the value that lost a conflict joins them', async () => {
  const { alice, bob, file } = await threeMembers();
  const bobs = diverge(
    file,
    () => {
      write(alice, 'team', 'A', 'alice-1');
      write(alice, 'team', 'A', 'alice-2');
    },
    () => write(bob, 'team', 'A', 'bob-1'),
  );
  assert.equal(mergeShared(alice.dir, alice.key, 'team', bobs, 'container').conflicts, ['A']);
  assert.is(read(bob, 'team').get('A'), 'alice-2');
  sharedAs(bob, (e) => {
    const h = text(historyOf(e), 'A');
    assert.is(h[0], 'bob-1', 'the losing value is the newest previous value');
    assert.equal(new Set(h), new Set(['bob-1', 'alice-1', 'alpha']), `both sides' histories, alpha once: ${h}`);
    assert.is(h.length, 3);
  });
});

test('merge: a purge on one side that the history of the other side undoes is named', async () => {
  const { alice, bob, file } = await threeMembers();
  write(alice, 'team', 'A', 'beta');
  const key = openSharedContentKey(alice.dir, 'team', alice.secret);
  updateSharedEntries(alice.dir, 'team', key, new Map([['A', null]]), alice.secret, { keep: 10 });
  wipe(key);
  // Both sides start with A removed and its history kept; Alice purges it, Bob writes B.
  const bobs = diverge(
    file,
    () => {
      const k = openSharedContentKey(alice.dir, 'team', alice.secret);
      updateSharedEntries(alice.dir, 'team', k, new Map(), alice.secret, { keep: 10, purge: ['A'] });
      wipe(k);
    },
    () => write(bob, 'team', 'B', 'bee'),
  );
  const r = mergeShared(alice.dir, alice.key, 'team', bobs, null);
  assert.equal([r.outcome, r.oneSided, r.historyOneSided], ['merged', ['B'], ['A']]);
});

test.run();
