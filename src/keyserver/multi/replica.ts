/**
 * A fetch process's copy of the live shares (multi/replica-feed.ts sends it):
 * every verified, unexpired share of the store, in the same compact share
 * table as the store's own index, updated after every durable change in the
 * store's process. It answers one question, fast: is this share live here,
 * and with which version and count. Anything else (pending, unknown,
 * expired, not yet here) is the store's process's to answer, so a stale copy
 * can delay nothing but a fetch count.
 *
 * The copy travels as store records in the store's own framing (length,
 * type, payload, CRC-32C: store/records.ts), without token hashes (a fetch
 * process needs none). Tombstones are applied (a late put must not bring a
 * share back) and forgotten after an hour, as the store forgets them.
 */
import type { ShareCode } from '../share-code.js';
import { decodeRecord, readFrame } from '../store/records.js';
import { ShareIndex } from '../store/share-index.js';
import { PEEK_EXPIRES_AT, PEEK_VERIFIED_AT } from '../store/share-table.js';
import { factsOf, type FetchedFacts } from '../wire/fetched-cache.js';

/** How long a tombstone is kept (the store's default retention). */
const TOMBSTONE_KEPT_MS = 3_600_000;

export class Replica {
  private readonly index: ShareIndex;

  constructor(serverId: number) {
    this.index = new ShareIndex(serverId);
  }

  get size(): number {
    return this.index.shares.size;
  }

  /** Applies a batch of framed records; throws on a damaged frame (the channel does not damage bytes: a bug). */
  apply(frames: Uint8Array): void {
    for (let at = 0; at < frames.length; ) {
      const f = readFrame(frames, at);
      if (f.kind !== 'frame')
        throw new Error(`replica batch: ${f.kind === 'damaged' ? f.reason : 'incomplete frame'} at ${at}`);
      const rec = decodeRecord(f.type, f.body);
      if (rec && (rec.type === 'putShare' || rec.type === 'fetchCount' || rec.type === 'tombstone'))
        this.index.apply(rec);
      at += f.size;
    }
  }

  /** True when `canonical` is a live share here; its numbers (ShareTable.peek) are then in `out`. */
  live(canonical: string, out: Float64Array, now: number): boolean {
    return this.index.shares.peek(canonical, out) >= 0 && out[PEEK_EXPIRES_AT]! > now && out[PEEK_VERIFIED_AT] !== 0;
  }

  /** What a fetched answer of `code` says besides its count (the share must be here). */
  facts(code: ShareCode): FetchedFacts {
    const s = this.index.shares.get(code.canonical);
    if (!s) throw new Error('replica: the share left between look-up and answer');
    return factsOf(code.display, s);
  }

  /** Forgets tombstones older than the store keeps them, and shares past their expiry. */
  purge(now: number): void {
    for (const [code, t] of this.index.tombstones)
      if (t.deletedAt + TOMBSTONE_KEPT_MS <= now) this.index.tombstones.delete(code);
    for (const code of this.index.shares.expiredCodes(now)) this.index.shares.delete(code);
  }
}
