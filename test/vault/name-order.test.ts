/**
 * Listings order names by UTF-16 code units (byCodeUnits in src/vault/names.ts),
 * with a comparator that is an order: 0 for equal names, and the opposite sign
 * when its arguments swap. V8's sort only asks whether the answer is below 0, so a
 * comparator that answers 1 for equal names sorts the same there; it is still no
 * order (a binary search, a merge or another engine's sort reads that 1 as "after").
 * So the comparator a listing gives sort() is taken and asked directly.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { exposedEntries } from '../../src/vault/sharing/former-members.js';

type Comparator = (a: unknown, b: unknown) => number;

/** The comparators `run` passes to Array.prototype.sort, in call order. */
function comparatorsOf(run: () => void): Comparator[] {
  const sort = Array.prototype.sort;
  const seen: Comparator[] = [];
  Array.prototype.sort = function (this: unknown[], compare?: Comparator) {
    if (compare) seen.push(compare);
    return sort.call(this, compare);
  };
  try {
    run();
  } finally {
    Array.prototype.sort = sort;
  }
  return seen;
}

// Code-unit order puts capitals before small letters, and an astral character
// (a surrogate pair, 0xD83D...) before U+FFFD: neither is alphabetical nor code-point order.
const NAMES = ['B', 'a', 'A', 'A_1', '\u{1F600}', '\uFFFD', 'a'];

test('exposedEntries sorts by code units with a comparator that is an order', () => {
  const m = { x25519: Buffer.alloc(32), ed25519: Buffer.alloc(32), removedAt: 1000, lastRevision: 1 };
  const entries = NAMES.map((name, i) => ({ name, changedAt: 100 + i }));
  let out: Array<{ name: string; changedAt: number }> = [];
  const [compare] = comparatorsOf(() => {
    out = exposedEntries(m, entries);
  });
  assert.equal(
    out.map((e) => e.name),
    ['A', 'A_1', 'B', 'a', 'a', '\u{1F600}', '\uFFFD'],
  );
  assert.ok(compare, 'exposedEntries sorts with a comparator');
  for (const a of entries) {
    for (const b of entries) {
      const ab = Math.sign(compare!(a, b));
      const ba = Math.sign(compare!(b, a));
      assert.is(ab, -ba, `compare(${JSON.stringify(a.name)}, ${JSON.stringify(b.name)}) and its swap disagree`);
      if (a.name === b.name) assert.is(ab, 0, `equal names ${JSON.stringify(a.name)} compare as 0`);
    }
  }
});

test.run();
