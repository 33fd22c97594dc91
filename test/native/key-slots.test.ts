/**
 * The key pool behind AgentClient.get() (src/native/key-slots.ts): keys in
 * 64-byte slots of sodium_malloc slabs; wipe() zeroes a slot and gives it
 * back, slots are reused oldest first, a key dropped without wipe() is zeroed
 * when collected, and anything that does not fit a slot keeps its own
 * sodium_malloc buffer.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { KeySlots, SLOT_BYTES, SLOTS_PER_SLAB } from '../../src/native/key-slots.js';
import { wipe as protocolWipe } from '../../src/protocol/index.js';
import { wipe as vaultWipe } from '../../src/vault/secure.js';
import { keySlots } from '../../src/native/key-slots.js';

const sodium = createRequire(import.meta.url)('sodium-native') as typeof import('sodium-native');

const key = (fill: number, length = 32): Buffer => Buffer.alloc(length, fill);

test('a key is copied into a slot of a secure slab; release zeroes the slot and frees it', () => {
  const slots = new KeySlots();
  const view = slots.copy(key(0x5a));
  assert.ok(view.equals(key(0x5a)));
  assert.is(view.length, 32);
  assert.is(view.buffer.byteLength, SLOT_BYTES * SLOTS_PER_SLAB, 'a view of a one-page slab');
  assert.is(
    (view as Buffer & { secure?: boolean }).secure,
    undefined,
    'not secure-flagged: sodium_free on it would free the slab',
  );
  assert.equal(slots.stats(), { slabs: 1, inUse: 1, freeSlotsZero: true });
  const whole = Buffer.from(view.buffer, view.byteOffset, SLOT_BYTES);
  assert.ok(slots.release(view));
  assert.ok(
    whole.every((b) => b === 0),
    'the slot is zeroed',
  );
  assert.ok(
    view.every((b) => b === 0),
    'a late read of the wiped key sees zeros',
  );
  assert.equal(slots.stats(), { slabs: 1, inUse: 0, freeSlotsZero: true });
  assert.not.ok(slots.release(view), 'a second release does nothing');
  assert.not.ok(slots.release(Buffer.alloc(32)), 'any other buffer is not a slot');
});

test('a slot given back is reused only after every other free slot', () => {
  const slots = new KeySlots();
  const first = slots.copy(key(1));
  const offset = first.byteOffset;
  slots.release(first);
  const next: Buffer[] = [];
  for (let i = 0; i < SLOTS_PER_SLAB - 1; i++) next.push(slots.copy(key(2)));
  assert.not.ok(
    next.some((v) => v.byteOffset === offset),
    'the 63 keys after it went to other slots',
  );
  const reused = slots.copy(key(3));
  assert.is(reused.byteOffset, offset, 'then it is reused');
  assert.ok(first.equals(key(3)), 'a Buffer used after wipe() can show a later key: the contract is to drop it');
  for (const v of [...next, reused]) slots.release(v);
});

test('slabs are added while more keys are held than a slab has slots, and freed when they are given back', () => {
  const slots = new KeySlots();
  const held = Array.from({ length: 3 * SLOTS_PER_SLAB + 5 }, (_, i) => slots.copy(key(i & 0xff)));
  assert.is(slots.stats().slabs, 4);
  assert.ok(
    held.every((v, i) => v.every((b) => b === (i & 0xff))),
    'every key is intact',
  );
  for (const v of held) slots.release(v);
  assert.equal(slots.stats(), { slabs: 1, inUse: 0, freeSlotsZero: true });
});

test('an empty key or one longer than a slot gets a sodium_malloc buffer of its own, freed by wipe()', () => {
  const slots = new KeySlots();
  for (const length of [0, SLOT_BYTES + 1, 1024]) {
    const own = slots.copy(key(7, length));
    assert.is(own.length, length);
    assert.is((own as Buffer & { secure?: boolean }).secure, true);
    assert.ok(own.equals(key(7, length)));
    assert.not.ok(slots.release(own));
    protocolWipe(own);
    assert.is(own.length, 0, 'freed: the memory is detached');
  }
  assert.is(slots.stats().slabs, 0, 'no slab was needed');
});

test('the protocol and the vault wipe() both give a slot of the process pool back', () => {
  for (const wipe of [protocolWipe, vaultWipe]) {
    const before = keySlots.stats().inUse;
    const view = keySlots.copy(key(9));
    assert.is(keySlots.stats().inUse, before + 1);
    wipe(view);
    assert.ok(view.every((b) => b === 0));
    assert.is(keySlots.stats().inUse, before);
  }
  const own = sodium.sodium_malloc(32);
  vaultWipe(own);
  assert.is(own.length, 0, 'a sodium_malloc buffer is still freed');
});

test('a key dropped without wipe() is zeroed when it is garbage collected, and its slot freed', () => {
  // A child with --expose-gc: the slot of a view that is only dropped must be zeroed by the finalizer.
  const url = pathToFileURL(join(process.cwd(), 'dist', 'native', 'key-slots.js')).href;
  const script = `
    const { KeySlots } = await import(${JSON.stringify(url)});
    const slots = new KeySlots();
    let view = slots.copy(Buffer.alloc(32, 0x77));
    const whole = Buffer.from(view.buffer, view.byteOffset, 32);
    const keep = slots.copy(Buffer.alloc(32, 0x66)); // the slab stays
    view = null;
    let rounds = 0;
    while (slots.stats().inUse > 1 && rounds++ < 50) {
      globalThis.gc();
      await new Promise((r) => setTimeout(r, 10));
    }
    console.log(JSON.stringify({ zero: whole.every((b) => b === 0), stats: slots.stats(), kept: keep.every((b) => b === 0x66) }));`;
  const r = spawnSync(process.execPath, ['--expose-gc', '--input-type=module', '-e', script], {
    encoding: 'utf8',
    timeout: 30_000,
  });
  assert.is(r.status, 0, r.stderr);
  const out = JSON.parse(r.stdout) as {
    zero: boolean;
    stats: { slabs: number; inUse: number; freeSlotsZero: boolean };
    kept: boolean;
  };
  assert.ok(out.zero, 'the dropped key was zeroed');
  assert.equal(out.stats, { slabs: 1, inUse: 1, freeSlotsZero: true });
  assert.ok(out.kept, 'the key still held is intact');
});

test.run();
