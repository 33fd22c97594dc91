/**
 * The three-way rule of a shared container merge (src/vault/sharing/merge-rule.ts),
 * over plain entry maps: which side each stored key takes, which keys are
 * conflicts and what each side did to them, and the same cases without the
 * common version (two-way), which keeps what main's merge kept.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { describeConflicts, threeWay, twoWay, type RuleResult } from '../../src/vault/sharing/merge-rule.js';

type Side = Record<string, string>;
const map = (s: Side) => new Map(Object.entries(s).map(([k, v]) => [k, Buffer.from(v)]));
const text = (m: ReadonlyMap<string, Uint8Array>) =>
  Object.fromEntries([...m].map(([k, v]) => [k, Buffer.from(v).toString()]).sort(([a], [b]) => (a! < b! ? -1 : 1)));
const three = (base: Side, ours: Side, theirs: Side, winner: 'ours' | 'theirs' | null = null): RuleResult =>
  threeWay(map(base), map(ours), map(theirs), winner);
const conflictKeys = (r: RuleResult) => r.conflicts.map((c) => [c.key, c.ours, c.theirs]);

test('one side changed: that side wins, whichever it is; nothing is a conflict', () => {
  const base = { A: 'a0', B: 'b0' };
  const r = three(base, { A: 'a1', B: 'b0' }, { A: 'a0', B: 'b1' });
  assert.equal(text(r.merged), { A: 'a1', B: 'b1' });
  assert.equal([r.fromOther, r.removed, r.conflicts], [['B'], [], []]);
});

test('both changed: a conflict naming what each side did; the same change on both is none', () => {
  const r = three({ A: 'a0', B: 'b0' }, { A: 'a1', B: 'same' }, { A: 'a2', B: 'same' });
  assert.equal(conflictKeys(r), [['A', 'changed', 'changed']]);
  assert.equal(text(r.merged), { A: 'a1', B: 'same' }, 'ours kept while nobody chose (the caller refuses)');
  const theirs = three({ A: 'a0' }, { A: 'a1' }, { A: 'a2' }, 'theirs');
  assert.equal([text(theirs.merged), theirs.fromOther], [{ A: 'a2' }, ['A']]);
  assert.is(
    describeConflicts(r.conflicts, { ours: 'ours', theirs: 'theirs' }),
    'A (changed in ours, changed in theirs)',
  );
});

test('removed: by one side (the other left it alone) it goes; by both, it goes; against a change, a conflict', () => {
  const one = three({ A: 'a0', B: 'b0' }, { A: 'a0', B: 'b0' }, { B: 'b0' });
  assert.equal([text(one.merged), one.removed, one.conflicts], [{ B: 'b0' }, ['A'], []]);
  const mine = three({ A: 'a0', B: 'b0' }, { B: 'b0' }, { A: 'a0', B: 'b1' });
  assert.equal([text(mine.merged), mine.removed, mine.fromOther], [{ B: 'b1' }, [], ['B']]);
  const both = three({ A: 'a0', B: 'b0' }, { B: 'b0' }, { B: 'b0' });
  assert.equal([text(both.merged), both.conflicts], [{ B: 'b0' }, []]);
  const against = three({ A: 'a0' }, { A: 'a1' }, {});
  assert.equal(conflictKeys(against), [['A', 'changed', 'removed']]);
  assert.is(
    describeConflicts(against.conflicts, { ours: 'ours', theirs: 'theirs' }),
    'A (changed in ours, removed in theirs)',
  );
  const theirsWins = three({ A: 'a0' }, { A: 'a1' }, {}, 'theirs');
  assert.equal([text(theirsWins.merged), theirsWins.removed], [{}, ['A']]);
});

test('added on both sides: equal values are one entry, different values a conflict; added on one side is taken', () => {
  const equal = three({}, { N: 'same' }, { N: 'same' });
  assert.equal([text(equal.merged), equal.conflicts], [{ N: 'same' }, []]);
  const differ = three({}, { N: 'n1' }, { N: 'n2' });
  assert.equal(conflictKeys(differ), [['N', 'added', 'added']]);
  const one = three({}, {}, { N: 'n2' });
  assert.equal([text(one.merged), one.fromOther], [{ N: 'n2' }, ['N']]);
});

test("a field and its entry's value are separate keys: a change to each on either side is no conflict", () => {
  const base = { 'web/github.com': 'pw0', 'web/github.com#username': 'pat' };
  const r = three(
    base,
    { 'web/github.com': 'pw1', 'web/github.com#username': 'pat' },
    { 'web/github.com': 'pw0', 'web/github.com#username': 'patricia', 'web/github.com#url': 'https://github.com' },
  );
  assert.equal(r.conflicts, []);
  assert.equal(text(r.merged), {
    'web/github.com': 'pw1',
    'web/github.com#url': 'https://github.com',
    'web/github.com#username': 'patricia',
  });
  const same = three(base, { ...base, 'web/github.com#username': 'a' }, { ...base, 'web/github.com#username': 'b' });
  assert.equal(conflictKeys(same), [['web/github.com#username', 'changed', 'changed']]);
});

test('a field added to an entry the other side removed is a conflict; its winner keeps the whole entry or none of it', () => {
  const base = { P: 'p0', 'P#url': 'u0' };
  const theirs = { P: 'p0', 'P#url': 'u0', 'P#notes': 'n' };
  const r = three(base, {}, theirs);
  assert.equal(conflictKeys(r), [['P#notes', 'removed', 'added']]);
  assert.is(
    describeConflicts(r.conflicts, { ours: 'ours', theirs: 'theirs' }),
    'P#notes (added in theirs; its entry P removed in ours)',
  );
  assert.equal(text(r.merged), {}, 'no field is left without its entry');
  const kept = three(base, {}, theirs, 'theirs');
  assert.equal(text(kept.merged), theirs);
  assert.equal([kept.removed, kept.fromOther.sort()], [[], ['P', 'P#notes', 'P#url']]);
  const gone = three(base, {}, theirs, 'ours');
  assert.equal([text(gone.merged), gone.removed], [{}, []]);
  // A field changed on one side, the entry removed on the other: the field's own conflict.
  const changed = three(base, { P: 'p0', 'P#url': 'u1' }, {}, 'ours');
  assert.equal(conflictKeys(changed), [['P#url', 'changed', 'removed']]);
  assert.equal(text(changed.merged), { P: 'p0', 'P#url': 'u1' }, 'the winner that kept the entry brings it back');
});

test('without the common version: a key one side lacks is kept, different values are a conflict', () => {
  const r = twoWay(map({ A: 'a1', B: 'b' }), map({ A: 'a2', C: 'c' }), null);
  assert.equal(text(r.merged), { A: 'a1', B: 'b', C: 'c' });
  assert.equal([r.oneSided, r.fromOther, r.conflicts.map((c) => c.key)], [['B', 'C'], ['C'], ['A']]);
});

test.run();
