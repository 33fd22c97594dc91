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
 * Token hashes (pending shares only) live in a 32-byte-wide column too, found
 * through a second hash table of their own: a Map by token of strings cost
 * about 250 bytes of V8 heap per pending share, 25 MB for 100,000 (issue 40).
 * Only a pending share's row of that column is ever written (growth copies
 * those rows alone), so its pages of zeros cost no resident memory for
 * verified shares. Wide keys are copies in memory of their own (ownBytes):
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
/** Width of the token hash column: a SHA-256. */
export const TOKEN_WIDTH = 32;
const NUMS = 8; // createdAt, expiresAt, verifiedAt, fetchCount, stamp epoch, stamp seq, fetch epoch, fetch seq
const SMALL = 6; // stamp origin, fetch origin, key length, flags, code length, spare
const HAS_TOKEN = 1;
const HAS_FETCH_STAMP = 2;
const LIVE = 4;
const WIDE_CODE = 8;
const WIDE_EMAIL = 16;
/** The token hash is in the token hash table (not while a confirmation of it is being written). */
const TOKEN_INDEXED = 32;
const WIDE_TOKEN = 64;
/** Smallest token hash table: it shrinks back to this once the pending shares are confirmed. */
const TOKEN_INDEX_MIN = 1024;
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

/** FNV-1a over bytes (a token hash: a SHA-256, or any bytes a replicated record holds). */
function hashOfBytes(bytes: Uint8Array): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < bytes.length; i++) {
    h ^= bytes[i]!;
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
  private tokens: Uint8Array;
  /** Token hashes not TOKEN_WIDTH bytes long (possible in the record format), by slot. */
  private readonly wideTokens = new Map<number, Buffer>();
  /** Slots of pending shares by token hash, as `hash` is by code; TOKEN_INDEXED slots only. */
  private tokenIndex = new Int32Array(TOKEN_INDEX_MIN);
  private tokenFilled = 0;
  private tokensIndexed = 0;
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
    this.tokens = new Uint8Array(capacity * TOKEN_WIDTH);
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
    if (oldFlags & TOKEN_INDEXED) this.unindexToken(slot);
    this.wideTokens.delete(slot);
    const token = share.tokenHash;
    if (token) {
      flags |= HAS_TOKEN | TOKEN_INDEXED;
      if (token.length === TOKEN_WIDTH) {
        this.tokens.set(token, slot * TOKEN_WIDTH);
      } else {
        flags |= WIDE_TOKEN;
        this.wideTokens.set(slot, ownBytes(token));
      }
    }
    this.small[s + 3] = flags;
    if (token) this.indexToken(slot);
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
    if (this.small[s + 3]! & TOKEN_INDEXED) this.unindexToken(slot);
    this.wideKeys.delete(slot);
    this.wideCodes.delete(slot);
    this.wideTokens.delete(slot);
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

  /** The code of the pending share whose token hash is `tokenHash`, unless a confirmation has taken it. */
  codeOfToken(tokenHash: Uint8Array): string | undefined {
    const at = this.tokenPosition(tokenHash);
    return at < 0 ? undefined : this.codeOf(this.tokenIndex[at]! - 1);
  }

  /**
   * Takes `tokenHash` out of the token hash table while its confirmation is
   * written, so that a second one cannot find it; the share keeps it until
   * the verification is applied. False when it is not there.
   */
  takeToken(tokenHash: Uint8Array): boolean {
    const at = this.tokenPosition(tokenHash);
    if (at < 0) return false;
    this.unindexToken(this.tokenIndex[at]! - 1);
    return true;
  }

  /** Puts back the token hash of `code`'s share (its confirmation failed); nothing when it has none or it is there. */
  restoreToken(code: string): void {
    const slot = this.slotOf(code);
    if (slot < 0) return;
    const flags = this.small[slot * SMALL + 3]!;
    if (flags & HAS_TOKEN && !(flags & TOKEN_INDEXED)) {
      this.small[slot * SMALL + 3] = flags | TOKEN_INDEXED;
      this.indexToken(slot);
    }
  }

  /** Token hashes that codeOfToken finds (tests: the table follows the shares). */
  get tokenCount(): number {
    return this.tokensIndexed;
  }

  /** The token hash of `slot` in place (a view of the column, or the side Map's copy). */
  private tokenOf(slot: number, flags: number): Uint8Array {
    if (flags & WIDE_TOKEN) return this.wideTokens.get(slot)!;
    return this.tokens.subarray(slot * TOKEN_WIDTH, (slot + 1) * TOKEN_WIDTH);
  }

  private tokenIs(slot: number, tokenHash: Uint8Array): boolean {
    const flags = this.small[slot * SMALL + 3]!;
    if (flags & WIDE_TOKEN) return this.wideTokens.get(slot)!.equals(tokenHash);
    if (tokenHash.length !== TOKEN_WIDTH) return false;
    const at = slot * TOKEN_WIDTH;
    for (let i = 0; i < TOKEN_WIDTH; i++) if (this.tokens[at + i] !== tokenHash[i]) return false;
    return true;
  }

  /** Position of `tokenHash` in the token hash table, or -1. */
  private tokenPosition(tokenHash: Uint8Array): number {
    const mask = this.tokenIndex.length - 1;
    // Terminates: the table is never more than half full.
    for (let i = hashOfBytes(tokenHash) & mask; ; i = (i + 1) & mask) {
      const e = this.tokenIndex[i]!;
      if (e === EMPTY) return -1;
      if (e > 0 && this.tokenIs(e - 1, tokenHash)) return i;
    }
  }

  /**
   * Adds the token hash of `slot` (flagged TOKEN_INDEXED) to the token hash
   * table; a share already there with the same token hash leaves it, as a
   * Map's set would replace the entry.
   */
  private indexToken(slot: number): void {
    const token = this.tokenOf(slot, this.small[slot * SMALL + 3]!);
    const mask = this.tokenIndex.length - 1;
    let reuse = -1;
    let i = hashOfBytes(token) & mask;
    for (; ; i = (i + 1) & mask) {
      const e = this.tokenIndex[i]!;
      if (e === EMPTY) break;
      if (e === DELETED) {
        if (reuse < 0) reuse = i;
      } else if (this.tokenIs(e - 1, token)) {
        this.small[(e - 1) * SMALL + 3]! &= ~TOKEN_INDEXED;
        this.tokenIndex[i] = slot + 1;
        return;
      }
    }
    if (reuse < 0) {
      reuse = i;
      this.tokenFilled++;
    }
    this.tokenIndex[reuse] = slot + 1;
    this.tokensIndexed++;
    if (this.tokenFilled * 2 > this.tokenIndex.length) this.rehashTokens();
  }

  /** Removes `slot` (TOKEN_INDEXED) from the token hash table and clears the flag; shrinks the table once mostly empty. */
  private unindexToken(slot: number): void {
    const mask = this.tokenIndex.length - 1;
    for (let i = hashOfBytes(this.tokenOf(slot, this.small[slot * SMALL + 3]!)) & mask; ; i = (i + 1) & mask) {
      const e = this.tokenIndex[i]!;
      if (e === EMPTY) break;
      if (e === slot + 1) {
        this.tokenIndex[i] = DELETED;
        this.tokensIndexed--;
        break;
      }
    }
    this.small[slot * SMALL + 3]! &= ~TOKEN_INDEXED;
    if (this.tokenIndex.length > TOKEN_INDEX_MIN && this.tokensIndexed * 8 < this.tokenIndex.length)
      this.rehashTokens();
  }

  /** Rebuilds the token hash table without deleted entries, at most 40 % full. */
  private rehashTokens(): void {
    this.tokenIndex = new Int32Array(
      powerOfTwoAtLeast(Math.max(TOKEN_INDEX_MIN, Math.ceil(this.tokensIndexed * 2.5) + 2)),
    );
    this.tokenFilled = 0;
    const mask = this.tokenIndex.length - 1;
    for (let slot = 0; slot < this.used; slot++) {
      const flags = this.small[slot * SMALL + 3]!;
      if (!(flags & TOKEN_INDEXED)) continue;
      let i = hashOfBytes(this.tokenOf(slot, flags)) & mask;
      while (this.tokenIndex[i] !== EMPTY) i = (i + 1) & mask;
      this.tokenIndex[i] = slot + 1;
      this.tokenFilled++;
    }
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
      tokenHash: flags & HAS_TOKEN ? Buffer.from(this.tokenOf(slot, flags)) : undefined,
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
    // Only the rows of pending shares: a copy of the whole column would make its pages of zeros resident.
    const tokens = new Uint8Array(this.capacity * TOKEN_WIDTH);
    for (let slot = 0; slot < this.used; slot++) {
      if ((this.small[slot * SMALL + 3]! & (HAS_TOKEN | WIDE_TOKEN)) !== HAS_TOKEN) continue;
      tokens.set(this.tokenOf(slot, HAS_TOKEN), slot * TOKEN_WIDTH);
    }
    this.tokens = tokens;
    this.emailAt = widen(this.emailAt, new Uint32Array(this.capacity));
    this.emailLen = widen(this.emailLen, new Uint16Array(this.capacity));
  }
}

function widen<T extends Float64Array | Uint8Array | Uint32Array | Uint16Array>(old: T, bigger: T): T {
  bigger.set(old as never);
  return bigger;
}
