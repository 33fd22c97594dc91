import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { randomBytes } from 'node:crypto';
import { KeyCache, CacheFullError, type Clock } from '../../src/agent/cache.js';

function fakeClock(): Clock & { advance(ms: number, which?: 'both' | 'wall' | 'mono'): void } {
  let wall = 1_700_000_000_000;
  let mono = 1000;
  return {
    wall: () => wall,
    mono: () => mono,
    advance(ms, which = 'both') {
      if (which !== 'mono') wall += ms;
      if (which !== 'wall') mono += ms;
    },
  };
}

const alloc = (n: number): Buffer => Buffer.alloc(n);

test('put/get round trip copies the key', () => {
  const cache = new KeyCache(10, fakeClock());
  const id = randomBytes(16);
  const key = randomBytes(32);
  cache.put(id, key, '/x', 60);
  key.fill(0); // the cache holds its own copy
  const hit = cache.get(id, alloc);
  assert.ok(hit);
  assert.is(hit!.key.length, 32);
  assert.ok(!hit!.key.every((b) => b === 0));
  assert.is(hit!.ttl, 60);
});

test('default TTL is 900 s', () => {
  const clock = fakeClock();
  const cache = new KeyCache(10, clock);
  const id = randomBytes(16);
  cache.put(id, randomBytes(32), null, null);
  assert.is(cache.list()[0]!.ttl, 900);
  clock.advance(899_000);
  assert.ok(cache.get(id, alloc));
  clock.advance(900_000);
  assert.is(cache.get(id, alloc), null);
});

test('sliding expiry: each hit moves the expiry to now + TTL', () => {
  const clock = fakeClock();
  const cache = new KeyCache(10, clock);
  const id = randomBytes(16);
  cache.put(id, randomBytes(32), null, 10);
  for (let i = 0; i < 5; i++) {
    clock.advance(8000);
    assert.ok(cache.get(id, alloc), `hit ${i}`);
  }
  clock.advance(10_000);
  assert.is(cache.get(id, alloc), null);
  assert.is(cache.size, 0, 'expired entry was removed on access');
});

test('list never extends a TTL', () => {
  const clock = fakeClock();
  const cache = new KeyCache(10, clock);
  const id = randomBytes(16);
  cache.put(id, randomBytes(32), 'p', 10);
  clock.advance(6000);
  assert.is(cache.list()[0]!.expiresInMs, 4000);
  clock.advance(3000);
  cache.list();
  assert.is(cache.list()[0]!.expiresInMs, 1000);
  clock.advance(1000);
  assert.equal(cache.list(), []);
});

test('wall clock running during suspend expires keys (monotonic stopped)', () => {
  const clock = fakeClock();
  const cache = new KeyCache(10, clock);
  cache.put(randomBytes(16), randomBytes(32), null, 60);
  clock.advance(3_600_000, 'wall'); // the machine slept an hour: CLOCK_MONOTONIC did not move
  assert.is(cache.prune(), 1);
});

test('a wall clock set back does not keep a key alive', () => {
  const clock = fakeClock();
  const cache = new KeyCache(10, clock);
  cache.put(randomBytes(16), randomBytes(32), null, 60);
  clock.advance(-86_400_000, 'wall');
  clock.advance(61_000, 'mono');
  assert.is(cache.prune(), 1);
});

test('entry bound gives a clear CACHE_FULL; replacing an existing id is allowed', () => {
  const cache = new KeyCache(3, fakeClock());
  const ids = [randomBytes(16), randomBytes(16), randomBytes(16)];
  for (const id of ids) cache.put(id, randomBytes(32), null, 60);
  cache.put(ids[0]!, randomBytes(32), null, 60);
  try {
    cache.put(randomBytes(16), randomBytes(32), null, 60);
    assert.unreachable();
  } catch (err) {
    assert.instance(err, CacheFullError);
    assert.is((err as CacheFullError).code, 'CACHE_FULL');
  }
  assert.ok(cache.forget(ids[1]!));
  assert.not.ok(cache.forget(ids[1]!));
  cache.put(randomBytes(16), randomBytes(32), null, 60);
  assert.is(cache.forgetAll(), 3);
  assert.is(cache.size, 0);
});

test('nextExpiryMs reports the soonest expiry', () => {
  const clock = fakeClock();
  const cache = new KeyCache(10, clock);
  assert.is(cache.nextExpiryMs(), null);
  cache.put(randomBytes(16), randomBytes(32), null, 30);
  cache.put(randomBytes(16), randomBytes(32), null, 5);
  assert.is(cache.nextExpiryMs(), 5000);
});

test.run();
