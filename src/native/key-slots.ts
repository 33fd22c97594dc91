/**
 * Secure memory for the keys AgentClient.get() hands out: 64-byte slots in
 * sodium_malloc slabs of one page (64 slots), instead of one sodium_malloc
 * per key. sodium_malloc maps a key's page between guard pages, mlocks it and
 * keeps it out of core dumps, and libsodium's free unmaps it (in sodium-native
 * 5.1.0 only once the collector finalises the buffer: sodium_free detaches it):
 * about ten system calls, most of a get() round trip (docs/benchmarks.md).
 * A slab is the same kind of memory (locked, out of core dumps), with its
 * guard pages around the slab instead of around each key. (The agent's own
 * secure memory is reused too, through native/secure-pool.ts.)
 *
 * - get() returns a view of exactly the key's bytes in its slot. It is not
 *   `secure`-flagged (sodium_free on it would free the slab under other keys).
 * - wipe() (protocol or vault) zeroes the slot and gives it back. Free slots
 *   are reused oldest first, so a slot given back is reused only after every
 *   other free slot (63 further keys at least). The contract, as for every
 *   key: do not use it after wipe(). (A sodium_malloc buffer reads as empty
 *   after wipe; a slot reads as zeros until it is reused.)
 * - A key that is dropped without wipe() is zeroed when its Buffer is
 *   garbage collected, and its slot freed then (a FinalizationRegistry).
 * - A slab whose slots are all free is freed (sodium_free), except the last.
 * - A key longer than a slot, or empty, gets a sodium_malloc buffer of its
 *   own, as before: wipe() zeroes and frees it.
 * docs/protocol.md, "Memory".
 */
import { loadSodium } from './sodium.js';

// Loaded on first use: the vault's wipe() imports this module, and importing
// the vault must not load the native library (`stash --help`).
const sodium = (): ReturnType<typeof loadSodium> => loadSodium();

/** The largest key a slot holds; every key stash caches has 32 bytes. */
export const SLOT_BYTES = 64;
export const SLOTS_PER_SLAB = 64;

interface Slab {
  /** SLOTS_PER_SLAB * SLOT_BYTES bytes of sodium_malloc memory. */
  mem: Buffer;
  freeCount: number;
}

interface Slot {
  slab: Slab;
  index: number;
}

/** What the pool holds, for tests. */
export interface SlotStats {
  slabs: number;
  /** Slots whose view is neither wiped nor collected. */
  inUse: number;
  /** True when every free slot is all zero. */
  freeSlotsZero: boolean;
}

export class KeySlots {
  private readonly slabs: Slab[] = [];
  /** Free slots, oldest first. */
  private free: Slot[] = [];
  private readonly views = new WeakMap<Buffer, Slot>();
  private readonly registry = new FinalizationRegistry<Slot>((slot) => this.giveBack(slot));

  /** A copy of `key` in secure memory: a slot when it fits, else a sodium_malloc buffer of its own (`secure`). */
  copy(key: Uint8Array): Buffer {
    if (key.length === 0 || key.length > SLOT_BYTES) {
      const own = sodium().sodium_malloc(key.length);
      own.set(key);
      return own;
    }
    if (this.free.length === 0) this.addSlab();
    const slot = this.free.shift()!;
    slot.slab.freeCount--;
    const view = Buffer.from(slot.slab.mem.buffer, slot.slab.mem.byteOffset + slot.index * SLOT_BYTES, key.length);
    view.set(key);
    this.views.set(view, slot);
    this.registry.register(view, slot, slot);
    return view;
  }

  /** Zeroes a view from copy() and frees its slot; false (nothing done) for any other buffer. */
  release(buf: Uint8Array): boolean {
    const slot = this.views.get(buf as Buffer);
    if (slot === undefined) return false;
    this.views.delete(buf as Buffer);
    this.registry.unregister(slot);
    this.giveBack(slot);
    return true;
  }

  stats(): SlotStats {
    let free = 0;
    let freeSlotsZero = true;
    for (const { slab, index } of this.free) {
      free++;
      if (!sodium().sodium_is_zero(slab.mem.subarray(index * SLOT_BYTES, (index + 1) * SLOT_BYTES)))
        freeSlotsZero = false;
    }
    return { slabs: this.slabs.length, inUse: this.slabs.length * SLOTS_PER_SLAB - free, freeSlotsZero };
  }

  private addSlab(): void {
    const mem = sodium().sodium_malloc(SLOTS_PER_SLAB * SLOT_BYTES);
    sodium().sodium_memzero(mem); // sodium_malloc fills new memory with 0xdb
    const slab: Slab = { mem, freeCount: SLOTS_PER_SLAB };
    this.slabs.push(slab);
    for (let i = 0; i < SLOTS_PER_SLAB; i++) this.free.push({ slab, index: i });
  }

  private giveBack(slot: Slot): void {
    const { slab, index } = slot;
    sodium().sodium_memzero(slab.mem.subarray(index * SLOT_BYTES, (index + 1) * SLOT_BYTES));
    this.free.push(slot);
    if (++slab.freeCount === SLOTS_PER_SLAB && this.slabs.length > 1) {
      this.slabs.splice(this.slabs.indexOf(slab), 1);
      this.free = this.free.filter((s) => s.slab !== slab);
      sodium().sodium_free(slab.mem);
    }
  }
}

/** The pool of this process: a key outlives the client connection that fetched it. */
export const keySlots = new KeySlots();
