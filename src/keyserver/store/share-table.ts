/**
 * The shares of the index in a few large typed arrays, off the V8 heap,
 * instead of one object graph per share (an object, two Buffers, two stamps,
 * two strings and a Map entry: ~530 bytes of heap each). A share lives in a
 * numbered slot: numbers in one Float64Array (8 per slot), small fields in
 * one Uint8Array (6 per slot), the public key in a 65-byte-wide slab, the code
 * in a 16-byte-wide slab, the email in a byte arena (offset and length per
 * slot). Codes are found through an open-addressing hash table of slot
 * numbers (an Int32Array, linear probing, at most half full). The heap holds
 * no object per share, so a full garbage collection costs the same with
 * 100,000 shares as with none (docs/benchmarks.md, "Memory").
 *
 * Token hashes live in a Map by slot: only pending shares have one, and they
 * are few (15 minutes of publishes), so a column would be mostly empty; they
 * are kept as latin1 strings (48 bytes of heap for 32 bytes, against about
 * 200 for a Buffer). Wide keys are copies in memory of their own (ownBytes):
 * a kept slice of node's Buffer pool would keep its whole 8 KiB slab alive.
 * Freed slots are reused; the arrays double when full; an email that changes
 * leaves its old bytes in the arena until they are a third of it, then the
 * arena is rewritten. Fields the columns cannot hold exactly (a key wider
 * than 65 bytes, a code wider than 16 bytes or not ASCII, an email not ASCII
 * or over 65,535 bytes: possible in the record format, unusual in practice)
 * go to side Maps, so every field round-trips exactly.
 *
 * `get` and `values` hand out fresh ShareState objects (copies): a caller may
 * keep one while the slot is freed and reused.
 */
import { ownBytes } from '../own-bytes.js';
import type { ShareState, Stamp } from './records.js';

/** Width of the public key column: an uncompressed P-256 point. */
export const KEY_WIDTH = 65;
/** Width of the code column: a canonical share code is 15 characters. */
export const CODE_WIDTH = 16;
const NUMS = 8; // createdAt, expiresAt, verifiedAt, fetchCount, stamp epoch, stamp seq, fetch epoch, fetch seq
const SMALL = 6; // stamp origin, fetch origin, key length, flags, code length, spare
const HAS_TOKEN = 1;
const HAS_FETCH_STAMP = 2;
const LIVE = 4;
const WIDE_CODE = 8;
const WIDE_EMAIL = 16;
/** Hash table entries: 0 = never used, -1 = deleted, n > 0 = slot n - 1. */
const EMPTY = 0;
const DELETED = -1;
const MAX_EMAIL_BYTES = 0xffff;
/** Arena rewrite: when dead bytes exceed a third of it and this many bytes. */
const ARENA_REWRITE_MIN = 1 << 16;

const ASCII = /^[\x00-\x7f]*$/;

/** Where ShareTable.peek puts each number (a Float64Array of PEEK_SIZE). */
export const PEEK_EXPIRES_AT = 0;
export const PEEK_VERIFIED_AT = 1;
export const PEEK_FETCH_COUNT = 2;
export const PEEK_STAMP_EPOCH = 3;
export const PEEK_STAMP_SEQ = 4;
export const PEEK_STAMP_ORIGIN = 5;
export const PEEK_SIZE = 6;

/** FNV-1a over the UTF-16 code units of `code`. */
function hashOf(code: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < code.length; i++) {
    h ^= code.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

/** The smallest power of two >= n (n >= 1). */
function powerOfTwoAtLeast(n: number): number {
  let p = 1;
  while (p < n) p *= 2;
  return p;
}

/** A snapshot in progress: the slots it has not reached keep here their state as of the cut when they change. */
interface Cut {
  /** Slots in use at the cut; later ones are not part of it. */
  used: number;
  /** The next slot the iteration reads. */
  next: number;
  /** State at the cut of changed slots not yet read (null: free at the cut). */
  saved: Map<number, ShareState | null>;
}

/** Every share as of one instant, read lazily; close() it if it is not iterated to the end. */
export interface TableSnapshot extends Iterable<ShareState> {
  close(): void;
}

export class ShareTable {
  private nums: Float64Array;
  private small: Uint8Array;
  private keys: Uint8Array;
  private codes: Buffer;
  private emailAt: Uint32Array;
  private emailLen: Uint16Array;
  private emails: Buffer;
  private emailEnd = 0;
  private emailDead = 0;
  private hash: Int32Array;
  /** Hash table entries not EMPTY (live and deleted): the probe chains' length bound. */
  private hashFilled = 0;
  private readonly wideKeys = new Map<number, Buffer>();
  private readonly wideCodes = new Map<number, string>();
  private readonly wideEmails = new Map<number, string>();
  /** Token hashes by slot, one character per byte (latin1): a short string costs less heap than a Buffer. */
  private readonly tokenHashes = new Map<number, string>();
  private readonly free: number[] = [];
  private readonly cuts = new Set<Cut>();
  private used = 0;
  private count = 0;

  constructor(private capacity = 1024) {
    if (!(capacity >= 1)) throw new RangeError('capacity must be at least 1');
    this.nums = new Float64Array(capacity * NUMS);
    this.small = new Uint8Array(capacity * SMALL);
    this.keys = new Uint8Array(capacity * KEY_WIDTH);
    this.codes = Buffer.alloc(capacity * CODE_WIDTH);
    this.emailAt = new Uint32Array(capacity);
    this.emailLen = new Uint16Array(capacity);
    this.emails = Buffer.alloc(capacity * 32);
    this.hash = new Int32Array(powerOfTwoAtLeast(capacity * 2));
  }

  get size(): number {
    return this.count;
  }

  /** Slots allocated (tests: growth and reuse). */
  get slotCapacity(): number {
    return this.capacity;
  }

  /** Bytes of the email arena, dead ones included (tests: rewriting). */
  get emailArenaBytes(): number {
    return this.emailEnd;
  }

  has(code: string): boolean {
    return this.slotOf(code) >= 0;
  }

  /** A copy of the share, or undefined. */
  get(code: string): ShareState | undefined {
    const slot = this.slotOf(code);
    return slot < 0 ? undefined : this.read(slot);
  }

  /**
   * The fetch path's look-up, without a copy: the slot of `code` (-1 when it
   * is not here), and in `out` its PEEK_* numbers. The stamp identifies the
   * version of the share: any change but a fetch count gives it a new one.
   */
  peek(code: string, out: Float64Array): number {
    const slot = this.slotOf(code);
    if (slot < 0) return -1;
    const n = slot * NUMS;
    out[PEEK_EXPIRES_AT] = this.nums[n + 1]!;
    out[PEEK_VERIFIED_AT] = this.nums[n + 2]!;
    out[PEEK_FETCH_COUNT] = this.nums[n + 3]!;
    out[PEEK_STAMP_EPOCH] = this.nums[n + 4]!;
    out[PEEK_STAMP_SEQ] = this.nums[n + 5]!;
    out[PEEK_STAMP_ORIGIN] = this.small[slot * SMALL]!;
    return slot;
  }

  /** Stores every field of `share` (a new slot, or the code's slot overwritten). */
  set(share: ShareState): void {
    let slot = this.slotOf(share.code);
    const fresh = slot < 0;
    if (fresh) slot = this.allocate();
    if (this.cuts.size !== 0) this.beforeChange(slot);
    if (fresh) this.writeCode(slot, share.code);
    const s = slot * SMALL;
    const oldFlags = fresh ? 0 : this.small[s + 3]!;
    this.writeEmail(slot, share.email, oldFlags);
    const n = slot * NUMS;
    this.nums[n] = share.createdAt;
    this.nums[n + 1] = share.expiresAt;
    this.nums[n + 2] = share.verifiedAt;
    this.nums[n + 3] = share.fetchCount;
    this.nums[n + 4] = share.stamp.epoch;
    this.nums[n + 5] = share.stamp.seq;
    this.small[s] = share.stamp.origin;
    this.small[s + 2] = share.publicKey.length;
    let flags = LIVE | (this.small[s + 3]! & (WIDE_CODE | WIDE_EMAIL));
    if (share.publicKey.length > KEY_WIDTH) {
      this.wideKeys.set(slot, ownBytes(share.publicKey));
    } else {
      this.wideKeys.delete(slot);
      this.keys.set(share.publicKey, slot * KEY_WIDTH);
    }
    if (share.tokenHash) {
      flags |= HAS_TOKEN;
      this.tokenHashes.set(slot, share.tokenHash.toString('latin1'));
    } else {
      this.tokenHashes.delete(slot);
    }
    this.small[s + 3] = flags;
    if (fresh) {
      this.insertHash(slot, share.code);
      this.count++;
    }
    if (share.fetchStamp) this.setFetch(slot, share.fetchCount, share.fetchStamp);
  }

  /** Sets the fetch count and the stamp that set it; false when `code` is not here. */
  setFetchCount(code: string, fetchCount: number, stamp: Stamp): boolean {
    const slot = this.slotOf(code);
    if (slot < 0) return false;
    if (this.cuts.size !== 0) this.beforeChange(slot);
    this.setFetch(slot, fetchCount, stamp);
    return true;
  }

  delete(code: string): boolean {
    const at = this.hashPosition(code);
    if (at < 0) return false;
    const slot = this.hash[at]! - 1;
    if (this.cuts.size !== 0) this.beforeChange(slot);
    this.hash[at] = DELETED;
    const s = slot * SMALL;
    if (this.small[s + 3]! & WIDE_EMAIL) this.wideEmails.delete(slot);
    else this.emailDead += this.emailLen[slot]!;
    this.wideKeys.delete(slot);
    this.wideCodes.delete(slot);
    this.tokenHashes.delete(slot);
    this.small[s + 3] = 0;
    this.count--;
    this.free.push(slot);
    return true;
  }

  /** Copies of every share, in no particular order. */
  *values(): IterableIterator<ShareState> {
    const slots: number[] = [];
    for (let slot = 0; slot < this.used; slot++) if (this.small[slot * SMALL + 3]! & LIVE) slots.push(slot);
    // A share deleted while the iteration runs is skipped (its slot may hold another share by then: a copy of that is fine).
    for (const slot of slots) if (this.small[slot * SMALL + 3]! & LIVE) yield this.read(slot);
  }

  /**
   * Every share as of now, for compaction, without copying the table: the
   * iteration reads the live slots one by one, and a slot that changes
   * before the iteration has reached it first leaves its state as of now
   * with the snapshot (copy on write; a compaction sees a few such slots,
   * not 100,000). Share objects are made one by one as the iteration
   * reaches them. Iterate it to the end or close() it: until then every
   * change of an unread slot saves a copy.
   */
  snapshot(): TableSnapshot {
    const cut: Cut = { used: this.used, next: 0, saved: new Map() };
    this.cuts.add(cut);
    const close = (): void => {
      this.cuts.delete(cut);
      cut.saved.clear();
      cut.next = cut.used;
    };
    const table = this;
    return {
      close,
      *[Symbol.iterator]() {
        try {
          while (cut.next < cut.used) {
            const slot = cut.next++;
            const saved = cut.saved.get(slot);
            if (saved !== undefined) {
              cut.saved.delete(slot);
              if (saved !== null) yield saved;
            } else if (table.small[slot * SMALL + 3]! & LIVE) {
              yield table.read(slot);
            }
          }
        } finally {
          close();
        }
      },
    };
  }

  /** Open snapshots (tests: none is left behind). */
  get openSnapshots(): number {
    return this.cuts.size;
  }

  /** Saves the state of `slot` for every open snapshot that has not read it yet. */
  private beforeChange(slot: number): void {
    for (const cut of this.cuts) {
      if (slot >= cut.next && slot < cut.used && !cut.saved.has(slot)) {
        cut.saved.set(slot, this.small[slot * SMALL + 3]! & LIVE ? this.read(slot) : null);
      }
    }
  }

  /** Codes of the shares whose expiry is at or before `now` (no share copies made). */
  expiredCodes(now: number): string[] {
    const out: string[] = [];
    for (let slot = 0; slot < this.used; slot++) {
      if (this.small[slot * SMALL + 3]! & LIVE && this.nums[slot * NUMS + 1]! <= now) out.push(this.codeOf(slot));
    }
    return out;
  }

  private slotOf(code: string): number {
    const at = this.hashPosition(code);
    return at < 0 ? -1 : this.hash[at]! - 1;
  }

  /** Position of `code` in the hash table, or -1. */
  private hashPosition(code: string): number {
    const mask = this.hash.length - 1;
    // Terminates: the table is never more than half full, so an EMPTY entry is always reached.
    for (let i = hashOf(code) & mask; ; i = (i + 1) & mask) {
      const e = this.hash[i]!;
      if (e === EMPTY) return -1;
      if (e > 0 && this.codeIs(e - 1, code)) return i;
    }
  }

  private insertHash(slot: number, code: string): void {
    const mask = this.hash.length - 1;
    let i = hashOf(code) & mask;
    while (this.hash[i]! > 0) i = (i + 1) & mask;
    if (this.hash[i] === EMPTY) this.hashFilled++;
    this.hash[i] = slot + 1;
    if (this.hashFilled * 2 > this.hash.length) this.rehash();
  }

  /**
   * Rebuilds the hash table without deleted entries, at most 40 % full (a
   * quarter of the live count free before the next rehash: amortized O(1)
   * per insert), and at least twice the slot capacity.
   */
  private rehash(): void {
    this.hash = new Int32Array(powerOfTwoAtLeast(Math.max(this.capacity * 2, Math.ceil(this.count * 2.5) + 2)));
    this.hashFilled = 0;
    const mask = this.hash.length - 1;
    for (let slot = 0; slot < this.used; slot++) {
      if (!(this.small[slot * SMALL + 3]! & LIVE)) continue;
      let i = hashOf(this.codeOf(slot)) & mask;
      while (this.hash[i] !== EMPTY) i = (i + 1) & mask;
      this.hash[i] = slot + 1;
      this.hashFilled++;
    }
  }

  private codeIs(slot: number, code: string): boolean {
    const s = slot * SMALL;
    if (this.small[s + 3]! & WIDE_CODE) return this.wideCodes.get(slot) === code;
    const length = this.small[s + 4]!;
    if (code.length !== length) return false;
    const at = slot * CODE_WIDTH;
    for (let i = 0; i < length; i++) if (this.codes[at + i] !== code.charCodeAt(i)) return false;
    return true;
  }

  private codeOf(slot: number): string {
    if (this.small[slot * SMALL + 3]! & WIDE_CODE) return this.wideCodes.get(slot)!;
    const at = slot * CODE_WIDTH;
    return this.codes.toString('latin1', at, at + this.small[slot * SMALL + 4]!);
  }

  /** Writes the code of a new slot; sets or clears WIDE_CODE (the slot's other flags are rewritten by set()). */
  private writeCode(slot: number, code: string): void {
    const s = slot * SMALL;
    if (code.length <= CODE_WIDTH && ASCII.test(code)) {
      this.codes.write(code, slot * CODE_WIDTH, 'latin1');
      this.small[s + 4] = code.length;
      this.small[s + 3] = 0;
    } else {
      this.wideCodes.set(slot, code);
      this.small[s + 4] = 0;
      this.small[s + 3] = WIDE_CODE;
    }
  }

  private emailOf(slot: number, flags: number): string {
    if (flags & WIDE_EMAIL) return this.wideEmails.get(slot)!;
    const at = this.emailAt[slot]!;
    return this.emails.toString('latin1', at, at + this.emailLen[slot]!);
  }

  /** Stores the email of `slot` (kept in place when unchanged); sets or clears WIDE_EMAIL in the slot's flags. */
  private writeEmail(slot: number, email: string, oldFlags: number): void {
    const s = slot * SMALL;
    if (oldFlags & LIVE && this.emailOf(slot, oldFlags) === email) return;
    if (oldFlags & LIVE) {
      if (oldFlags & WIDE_EMAIL) this.wideEmails.delete(slot);
      else this.emailDead += this.emailLen[slot]!;
    }
    if (email.length > MAX_EMAIL_BYTES || !ASCII.test(email)) {
      this.wideEmails.set(slot, email);
      this.emailLen[slot] = 0;
      this.small[s + 3]! |= WIDE_EMAIL;
      return;
    }
    this.small[s + 3]! &= ~WIDE_EMAIL;
    if (this.emailEnd + email.length > this.emails.length) this.makeEmailRoom(email.length);
    this.emails.write(email, this.emailEnd, 'latin1');
    this.emailAt[slot] = this.emailEnd;
    this.emailLen[slot] = email.length;
    this.emailEnd += email.length;
  }

  /** Rewrites the arena without dead bytes when they are many, and grows it when the live ones need more room. */
  private makeEmailRoom(needed: number): void {
    const live = this.emailEnd - this.emailDead;
    const rewrite = this.emailDead > ARENA_REWRITE_MIN && this.emailDead * 3 > this.emailEnd;
    let size = this.emails.length;
    while (size < (rewrite ? live : this.emailEnd) + needed) size *= 2;
    const next = Buffer.alloc(size);
    if (!rewrite) {
      this.emails.copy(next, 0, 0, this.emailEnd);
    } else {
      let end = 0;
      for (let slot = 0; slot < this.used; slot++) {
        const flags = this.small[slot * SMALL + 3]!;
        if (!(flags & LIVE) || flags & WIDE_EMAIL) continue;
        const at = this.emailAt[slot]!;
        const length = this.emailLen[slot]!;
        this.emails.copy(next, end, at, at + length);
        this.emailAt[slot] = end;
        end += length;
      }
      this.emailEnd = end;
      this.emailDead = 0;
    }
    this.emails = next;
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
      code: this.codeOf(slot),
      publicKey: this.key(slot, this.small[s + 2]!),
      email: this.emailOf(slot, flags),
      createdAt: this.nums[n]!,
      expiresAt: this.nums[n + 1]!,
      verifiedAt: this.nums[n + 2]!,
      fetchCount: this.nums[n + 3]!,
      tokenHash: flags & HAS_TOKEN ? Buffer.from(this.tokenHashes.get(slot)!, 'latin1') : undefined,
      stamp: { origin: this.small[s]!, epoch: this.nums[n + 4]!, seq: this.nums[n + 5]! },
    };
    if (flags & HAS_FETCH_STAMP)
      share.fetchStamp = { origin: this.small[s + 1]!, epoch: this.nums[n + 6]!, seq: this.nums[n + 7]! };
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
    this.codes = widen(this.codes, Buffer.alloc(this.capacity * CODE_WIDTH));
    this.emailAt = widen(this.emailAt, new Uint32Array(this.capacity));
    this.emailLen = widen(this.emailLen, new Uint16Array(this.capacity));
  }
}

function widen<T extends Float64Array | Uint8Array | Uint32Array | Uint16Array>(old: T, bigger: T): T {
  bigger.set(old as never);
  return bigger;
}
