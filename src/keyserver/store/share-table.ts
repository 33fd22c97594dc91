/**
 * The shares of the index in a few large typed arrays instead of one object
 * graph per share (an object, two Buffers, two stamps: ~530 bytes of heap
 * each). A share lives in a numbered slot: numbers in one Float64Array
 * (8 per slot), small fields in one Uint8Array (4 per slot), the public key
 * in a 65-byte-wide slab; only the code (the Map key) and the email stay JS
 * strings. Token hashes live in a Map by slot: only pending shares have one,
 * and they are few (15 minutes of publishes), so a column would be mostly
 * empty. Freed slots are reused; the arrays double when full. Keys wider than
 * the column (possible in the record format, unusual in practice) go to a
 * side Map, so every field round-trips exactly.
 *
 * `get` and `values` hand out fresh ShareState objects (copies): a caller may
 * keep one while the slot is freed and reused.
 */
import type { ShareState, Stamp } from './records.js';

/** Width of the public key column: an uncompressed P-256 point. */
export const KEY_WIDTH = 65;
const NUMS = 8; // createdAt, expiresAt, verifiedAt, fetchCount, stamp epoch, stamp seq, fetch epoch, fetch seq
const SMALL = 4; // stamp origin, fetch origin, key length, flags
const HAS_TOKEN = 1;
const HAS_FETCH_STAMP = 2;

export class ShareTable {
  private readonly slots = new Map<string, number>();
  private codes: string[] = [];
  private emails: string[] = [];
  private nums: Float64Array;
  private small: Uint8Array;
  private keys: Uint8Array;
  private readonly wideKeys = new Map<number, Buffer>();
  private readonly tokenHashes = new Map<number, Buffer>();
  private readonly free: number[] = [];
  private used = 0;

  constructor(private capacity = 1024) {
    if (!(capacity >= 1)) throw new RangeError('capacity must be at least 1');
    this.nums = new Float64Array(capacity * NUMS);
    this.small = new Uint8Array(capacity * SMALL);
    this.keys = new Uint8Array(capacity * KEY_WIDTH);
  }

  get size(): number {
    return this.slots.size;
  }

  /** Slots allocated (tests: growth and reuse). */
  get slotCapacity(): number {
    return this.capacity;
  }

  has(code: string): boolean {
    return this.slots.has(code);
  }

  /** A copy of the share, or undefined. */
  get(code: string): ShareState | undefined {
    const slot = this.slots.get(code);
    return slot === undefined ? undefined : this.read(slot);
  }

  /** Stores every field of `share` (a new slot, or the code's slot overwritten). */
  set(share: ShareState): void {
    let slot = this.slots.get(share.code);
    if (slot === undefined) {
      slot = this.allocate();
      this.slots.set(share.code, slot);
      this.codes[slot] = share.code;
    }
    this.emails[slot] = share.email;
    const n = slot * NUMS;
    this.nums[n] = share.createdAt;
    this.nums[n + 1] = share.expiresAt;
    this.nums[n + 2] = share.verifiedAt;
    this.nums[n + 3] = share.fetchCount;
    this.nums[n + 4] = share.stamp.epoch;
    this.nums[n + 5] = share.stamp.seq;
    const s = slot * SMALL;
    this.small[s] = share.stamp.origin;
    this.small[s + 2] = share.publicKey.length;
    let flags = 0;
    if (share.publicKey.length > KEY_WIDTH) {
      this.wideKeys.set(slot, Buffer.from(share.publicKey));
    } else {
      this.wideKeys.delete(slot);
      this.keys.set(share.publicKey, slot * KEY_WIDTH);
    }
    if (share.tokenHash) {
      flags |= HAS_TOKEN;
      this.tokenHashes.set(slot, Buffer.from(share.tokenHash));
    } else {
      this.tokenHashes.delete(slot);
    }
    this.small[s + 3] = flags;
    if (share.fetchStamp) this.setFetch(slot, share.fetchCount, share.fetchStamp);
  }

  /** Sets the fetch count and the stamp that set it; false when `code` is not here. */
  setFetchCount(code: string, fetchCount: number, stamp: Stamp): boolean {
    const slot = this.slots.get(code);
    if (slot === undefined) return false;
    this.setFetch(slot, fetchCount, stamp);
    return true;
  }

  delete(code: string): boolean {
    const slot = this.slots.get(code);
    if (slot === undefined) return false;
    this.slots.delete(code);
    this.wideKeys.delete(slot);
    this.tokenHashes.delete(slot);
    // Drop the strings now: a free slot must not keep them alive.
    this.codes[slot] = '';
    this.emails[slot] = '';
    this.free.push(slot);
    return true;
  }

  /** Copies of every share, in no particular order. */
  *values(): IterableIterator<ShareState> {
    for (const slot of [...this.slots.values()]) yield this.read(slot);
  }

  /**
   * Every share as of now, for compaction: the slabs are copied at once (off
   * the JS heap, freed when the iteration is dropped), the share objects made
   * one by one as the iteration reaches them, so a 100,000-share cut does not
   * put 100,000 objects on the heap at the same time.
   */
  snapshot(): Iterable<ShareState> {
    const cut = new ShareTable(1);
    cut.codes = this.codes.slice(0, this.used);
    cut.emails = this.emails.slice(0, this.used);
    cut.nums = this.nums.slice(0, this.used * NUMS);
    cut.small = this.small.slice(0, this.used * SMALL);
    cut.keys = this.keys.slice(0, this.used * KEY_WIDTH);
    // Buffers in these maps are replaced by set(), never written into: sharing them is safe.
    for (const [slot, key] of this.wideKeys) cut.wideKeys.set(slot, key);
    for (const [slot, hash] of this.tokenHashes) cut.tokenHashes.set(slot, hash);
    const used = this.used;
    return (function* () {
      // A free slot has an empty code (delete()); every code of a share is non-empty.
      for (let slot = 0; slot < used; slot++) if (cut.codes[slot] !== '') yield cut.read(slot);
    })();
  }

  /** Codes of the shares whose expiry is at or before `now` (no copies made). */
  expiredCodes(now: number): string[] {
    const out: string[] = [];
    for (const [code, slot] of this.slots) if (this.nums[slot * NUMS + 1]! <= now) out.push(code);
    return out;
  }

  private setFetch(slot: number, fetchCount: number, stamp: Stamp): void {
    const n = slot * NUMS;
    this.nums[n + 3] = fetchCount;
    this.nums[n + 6] = stamp.epoch;
    this.nums[n + 7] = stamp.seq;
    this.small[slot * SMALL + 1] = stamp.origin;
    this.small[slot * SMALL + 3]! |= HAS_FETCH_STAMP;
  }

  private read(slot: number): ShareState {
    const n = slot * NUMS;
    const s = slot * SMALL;
    const flags = this.small[s + 3]!;
    const share: ShareState = {
      code: this.codes[slot]!,
      publicKey: this.key(slot, this.small[s + 2]!),
      email: this.emails[slot]!,
      createdAt: this.nums[n]!,
      expiresAt: this.nums[n + 1]!,
      verifiedAt: this.nums[n + 2]!,
      fetchCount: this.nums[n + 3]!,
      tokenHash: flags & HAS_TOKEN ? Buffer.from(this.tokenHashes.get(slot)!) : undefined,
      stamp: { origin: this.small[s]!, epoch: this.nums[n + 4]!, seq: this.nums[n + 5]! },
    };
    if (flags & HAS_FETCH_STAMP) share.fetchStamp = { origin: this.small[s + 1]!, epoch: this.nums[n + 6]!, seq: this.nums[n + 7]! };
    return share;
  }

  private key(slot: number, length: number): Buffer {
    const wide = this.wideKeys.get(slot);
    if (wide) return Buffer.from(wide);
    const out = Buffer.allocUnsafe(length);
    out.set(this.keys.subarray(slot * KEY_WIDTH, slot * KEY_WIDTH + length));
    return out;
  }

  private allocate(): number {
    const reused = this.free.pop();
    if (reused !== undefined) return reused;
    if (this.used === this.capacity) this.grow();
    return this.used++;
  }

  private grow(): void {
    this.capacity *= 2;
    this.nums = widen(this.nums, new Float64Array(this.capacity * NUMS));
    this.small = widen(this.small, new Uint8Array(this.capacity * SMALL));
    this.keys = widen(this.keys, new Uint8Array(this.capacity * KEY_WIDTH));
  }
}

function widen<T extends Float64Array | Uint8Array>(old: T, bigger: T): T {
  bigger.set(old);
  return bigger;
}
