/**
 * The in-memory state of the store, built by applying log records in order.
 * The same `apply` serves recovery at startup, local writes (called once a
 * record is durable) and events replicated from peers, so what a restart
 * rebuilds is exactly what was served.
 *
 * Merge rules (replication-safe; docs/key-server.md, "Replication"):
 * - a tombstone beats every put of the same code, earlier or later;
 * - two puts of one code: the fields of the later stamp win (last writer
 *   wins by origin_epoch, then sequence, then origin id), except that a
 *   verification is never undone and fetch counts merge by maximum;
 * - applying a record twice changes nothing (`apply` then returns false).
 */
import type { AckVector, ShareState, Stamp, StoreRecord, TombstoneReason } from './records.js';
import { BoundedMap } from '../limits/bounded-map.js';
import { ShareTable } from './share-table.js';

/** How many used verification tokens are remembered (about 150 bytes of heap each). */
export const CONFIRMED_TOKENS_KEPT = 10_000;

/**
 * The key of a token hash in the token maps: one character per byte
 * (latin1), 48 bytes of heap for a SHA-256 against 80 for its hex.
 */
export function tokenKey(tokenHash: Buffer): string {
  return tokenHash.toString('latin1');
}

export interface Tombstone {
  code: string;
  deletedAt: number;
  expiresAt: number;
  reason: TombstoneReason;
  stamp: Stamp;
}

/** A kept tombstone as the record (and replication event) that states it. */
export function tombstoneRecord(t: Tombstone): StoreRecord {
  return {
    type: 'tombstone',
    stamp: t.stamp,
    code: t.code,
    deletedAt: t.deletedAt,
    expiresAt: t.expiresAt,
    reason: t.reason,
  };
}

/** Total order of stamps: origin_epoch, then sequence, then origin id. */
export function compareStamps(a: Stamp, b: Stamp): number {
  return a.epoch - b.epoch || a.seq - b.seq || a.origin - b.origin;
}

/** Order of two stamps of the same origin (a restarted origin has a later epoch). */
export function laterOfOrigin(a: Stamp, b: { epoch: number; seq: number } | undefined): boolean {
  return b === undefined || a.epoch > b.epoch || (a.epoch === b.epoch && a.seq > b.seq);
}

export class ShareIndex {
  /**
   * The shares, packed (share-table.ts); `get` returns copies, changes go
   * through `set`. Pending shares are found by the SHA-256 of their
   * verification token there too (`codeOfToken`).
   */
  readonly shares = new ShareTable();
  /**
   * The same for tokens already used, so that a link opened again says
   * "already confirmed" rather than "unknown". Bounded (CONFIRMED_TOKENS_KEPT,
   * least recently used out) and rebuilt by recovery from the log's put and
   * verify records; a compacted log keeps no token of a verified share, so
   * after a compaction an old link falls back to the "unknown or expired" page.
   */
  readonly confirmedTokens = new BoundedMap<string>(CONFIRMED_TOKENS_KEPT);
  readonly tombstones = new Map<string, Tombstone>();
  /** Per replication peer URL: per origin, the highest stamp the peer acknowledged. */
  readonly acks = new Map<string, Map<number, { epoch: number; seq: number }>>();
  /** Per origin: the highest stamp seen in any record (replication progress). */
  readonly originHigh = new Map<number, Stamp>();
  /** Number of shares still waiting for verification. */
  pending = 0;
  /** Highest sequence number stamped by this server (replication_last_sequence). */
  lastSequence = 0;

  constructor(readonly serverId: number) {}

  /** Applies a record; true when the state changed (the event is news here). */
  apply(rec: StoreRecord): boolean {
    if (rec.stamp.origin === this.serverId && rec.stamp.seq > this.lastSequence) this.lastSequence = rec.stamp.seq;
    if (rec.type !== 'replAck' && laterOfOrigin(rec.stamp, this.originHigh.get(rec.stamp.origin)))
      this.originHigh.set(rec.stamp.origin, rec.stamp);
    switch (rec.type) {
      case 'putShare':
        return this.put(rec.share);
      case 'verify': {
        const old = this.shares.get(rec.code);
        if (old?.verifiedAt !== 0) return false;
        this.replace(old, { ...old, verifiedAt: rec.verifiedAt, tokenHash: undefined, stamp: rec.stamp });
        return true;
      }
      case 'fetchCount': {
        const share = this.shares.get(rec.code);
        if (!share) return false;
        // A compacted log writes the put (with the count) and then this record, only for its stamp.
        if (rec.fetchCount === share.fetchCount && !share.fetchStamp)
          this.shares.setFetchCount(rec.code, rec.fetchCount, rec.stamp);
        if (rec.fetchCount <= share.fetchCount) return false;
        this.shares.setFetchCount(rec.code, rec.fetchCount, rec.stamp);
        return true;
      }
      case 'tombstone': {
        if (this.tombstones.has(rec.code) && !this.shares.has(rec.code)) return false;
        this.remove(rec.code);
        this.tombstones.set(rec.code, {
          code: rec.code,
          deletedAt: rec.deletedAt,
          expiresAt: rec.expiresAt,
          reason: rec.reason,
          stamp: rec.stamp,
        });
        return true;
      }
      case 'replAck': {
        const acked = this.acks.get(rec.ack.peer) ?? new Map<number, { epoch: number; seq: number }>();
        for (const a of rec.ack.acked) {
          if (laterOfOrigin({ origin: a.origin, epoch: a.epoch, seq: a.seq }, acked.get(a.origin)))
            acked.set(a.origin, { epoch: a.epoch, seq: a.seq });
        }
        this.acks.set(rec.ack.peer, acked);
        return false;
      }
      case 'checkpoint':
        return false;
    }
  }

  /** The acknowledgement vector of `peer` as a record payload. */
  ackVector(peer: string): AckVector {
    const acked = [...(this.acks.get(peer) ?? new Map<number, { epoch: number; seq: number }>())].map(
      ([origin, s]) => ({ origin, ...s }),
    );
    return { peer, acked };
  }

  /** True when `peer` has not acknowledged a stamp this late from its origin. */
  unacked(peer: string, stamp: Stamp): boolean {
    return laterOfOrigin(stamp, this.acks.get(peer)?.get(stamp.origin));
  }

  private put(incoming: ShareState): boolean {
    const old = this.shares.get(incoming.code);
    const merged = this.mergePut(incoming);
    if (!merged) return false;
    this.replace(old, merged);
    return true;
  }

  /** What a put would turn the share into, or undefined when it changes nothing. */
  mergePut(incoming: ShareState): ShareState | undefined {
    if (this.tombstones.has(incoming.code)) return undefined;
    const old = this.shares.get(incoming.code);
    if (!old) return { ...incoming };
    const newer = compareStamps(incoming.stamp, old.stamp) > 0;
    const base = newer ? incoming : old;
    const other = newer ? old : incoming;
    const verifiedAt = base.verifiedAt !== 0 ? base.verifiedAt : other.verifiedAt;
    const merged: ShareState = {
      ...base,
      verifiedAt,
      tokenHash: verifiedAt !== 0 ? undefined : base.tokenHash,
      fetchCount: Math.max(old.fetchCount, incoming.fetchCount),
      fetchStamp: incoming.fetchCount > old.fetchCount ? incoming.stamp : old.fetchStamp,
      // The stamp of the last event that changed the share (a verification adopted from an older put counts).
      stamp: newer || verifiedAt !== old.verifiedAt ? incoming.stamp : old.stamp,
    };
    // A later stamp over the same content is no news: keeping the old stamp stops the event from travelling on.
    const sameFields =
      merged.expiresAt === old.expiresAt &&
      merged.createdAt === old.createdAt &&
      merged.email === old.email &&
      merged.publicKey.equals(old.publicKey) &&
      (merged.tokenHash?.equals(old.tokenHash ?? Buffer.alloc(0)) ?? old.tokenHash === undefined);
    const changed = !sameFields || merged.verifiedAt !== old.verifiedAt || merged.fetchCount !== old.fetchCount;
    return changed ? merged : undefined;
  }

  /** Whether applying `rec` would change the state (no side effects). */
  wouldChange(rec: StoreRecord): boolean {
    switch (rec.type) {
      case 'putShare':
        return this.mergePut(rec.share) !== undefined;
      case 'verify': {
        const old = this.shares.get(rec.code);
        return old !== undefined && old.verifiedAt === 0;
      }
      case 'fetchCount': {
        const share = this.shares.get(rec.code);
        return share !== undefined && rec.fetchCount > share.fetchCount;
      }
      case 'tombstone':
        return !(this.tombstones.has(rec.code) && !this.shares.has(rec.code));
      default:
        return false;
    }
  }

  /** Swaps `old` for `next`, keeping the used tokens and the pending count right (the table indexes the tokens). */
  private replace(old: ShareState | undefined, next: ShareState): void {
    if (old) {
      if (old.tokenHash && !next.tokenHash && next.verifiedAt !== 0)
        this.confirmedTokens.set(tokenKey(old.tokenHash), next.code);
      if (old.verifiedAt === 0) this.pending--;
    }
    this.shares.set(next);
    if (next.verifiedAt === 0) this.pending++;
  }

  private remove(code: string): void {
    const old = this.shares.get(code);
    if (!old) return;
    if (old.verifiedAt === 0) this.pending--;
    this.shares.delete(code);
  }
}

/**
 * The state of `index` as replication events: every unexpired share (pending
 * ones with their token hash) as a put_share, every kept tombstone.
 */
export function snapshotEvents(index: ShareIndex, now: number): StoreRecord[] {
  const out: StoreRecord[] = [];
  for (const s of index.shares.values())
    if (s.expiresAt > now) out.push({ type: 'putShare', stamp: s.stamp, share: s });
  for (const t of index.tombstones.values()) {
    out.push(tombstoneRecord(t));
  }
  return out;
}
