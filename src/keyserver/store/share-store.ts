import { StashError } from '../../errors.js';
import { DEFAULT_DISK_CAP_BYTES, compactionThreshold, diskBudget, type DiskBudget } from '../disk/budget.js';
import { StoreFullError } from '../errors.js';
import { openStoreLog } from './store-startup.js';
import { compactLog, indexSnapshot, type CompactionResult } from './compaction.js';
import type { LogWriter } from './log-writer.js';
import { Writer } from '../wire/codec.js';
import { encodeLogRecord, writeLogRecord } from './log-format.js';
import type { ShareState, Stamp, StoreRecord } from './records.js';
import { ShareIndex, laterOfOrigin, snapshotEvents, tokenKey } from './share-index.js';
import type {
  ChangeKey,
  Lookup,
  NewShare,
  PeekState,
  PendingItem,
  RemoteApplyResult,
  StoreOptions,
  StoreRecovery,
  StoreStats,
} from './store-types.js';
import { changedByRemote, eventFor, pendingFor } from './replication-view.js';
import { PEEK_EXPIRES_AT, PEEK_VERIFIED_AT, type TableSnapshot } from './share-table.js';
import { lockStateDir, prepareStateDir, syncDirectory } from './state-dir.js';

// The store's types live in store-types.ts; its users import them from here.
export type { ChangeKey, Lookup, NewShare, PeekState, PendingItem } from './store-types.js';
export type { RemoteApplyResult, StoreOptions, StoreRecovery, StoreStats } from './store-types.js';

/**
 * Shares with changed fetch counts that are written at once, before the
 * coalescing delay is over: a window's counts are held in memory until
 * written (an entry per share, and the batch's records), and most shares are
 * fetched once or twice, so under load a long window held tens of thousands
 * (docs/benchmarks.md, "Memory"). A hot share gets one record per write,
 * however often it was fetched since the last one.
 */
export const FETCH_FLUSH_BATCH = 2048;

export class ShareStore {
  private readonly index: ShareIndex;
  private writer!: LogWriter;
  private releaseLock: () => Promise<void> = async () => {};
  private readonly dirtyFetches = new Set<string>();
  /** Fetch counts served but not yet durable, by code. */
  private readonly counted = new Map<string, number>();
  private fetchTimer: NodeJS.Timeout | undefined;
  private sweepTimer: NodeJS.Timeout | undefined;
  private readonly sweeping = new Set<string>();
  private readonly reserved = new Set<string>();
  private compacting: Promise<CompactionResult | undefined> | undefined;
  private baseline = 0;
  private closed = false;
  private readonly listeners: Array<(change: ChangeKey) => void> = [];
  compactions = 0;
  private records = 0;
  private publishRefusals = 0;
  /** Why the last fetch-count write failed (logged once per reason, not every second). */
  private flushFailure: string | undefined;
  /** The disk cap's split (disk/budget.ts). */
  readonly budget: DiskBudget;
  /** What the startup check found (for logs, status and tests). */
  recovery: StoreRecovery = { records: 0, skipped: [], damagedCopy: undefined, startedEmpty: true };

  private constructor(private readonly opts: StoreOptions) {
    this.index = new ShareIndex(opts.serverId);
    this.budget = diskBudget(opts.diskCapBytes ?? DEFAULT_DISK_CAP_BYTES);
  }

  /** Opens the store in `opts.dir`: lock, startup check, timers. */
  static async open(opts: StoreOptions): Promise<ShareStore> {
    const store = new ShareStore(opts);
    await prepareStateDir(opts.dir);
    store.releaseLock = await lockStateDir(opts.dir);
    try {
      const result = await openStoreLog(opts, store.index, store.budget);
      store.writer = result.writer;
      store.records = result.records;
      // 0, not the loaded size: a big log inherited from before a restart is compacted at the threshold.
      store.baseline = 0;
      store.recovery = result.recovery;
      if (result.size >= store.budget.publishLimitBytes) {
        // No append would reach maybeCompact: publishes are refused from this size on.
        opts.logger.warn(
          `store: ${result.size} bytes in store.log, at or past the ${store.budget.publishLimitBytes} bytes up to which it takes new shares under the disk cap; compacting`,
        );
        void store.compact();
      }
    } catch (err) {
      await store.releaseLock();
      throw err;
    }
    const sweepMs = opts.sweepIntervalMs ?? 30_000;
    if (sweepMs > 0) {
      store.sweepTimer = setInterval(
        () => void store.sweep().catch((e) => opts.logger.error(`store: sweep failed: ${String(e)}`)),
        sweepMs,
      );
      store.sweepTimer.unref();
    }
    return store;
  }

  private stamp(): Stamp {
    return { origin: this.opts.serverId, epoch: this.opts.originEpoch, seq: ++this.index.lastSequence };
  }

  private append(rec: StoreRecord): Promise<void> {
    return this.writer
      .append(encodeLogRecord(rec), () => {
        this.records++;
        this.applyDurable(rec);
      })
      .then(() => this.maybeCompact());
  }

  /** Applies a record that is now on disk and tells replication what changed. */
  private applyDurable(rec: StoreRecord): void {
    if (!this.index.apply(rec)) return;
    const code = rec.type === 'putShare' ? rec.share.code : 'code' in rec ? rec.code : undefined;
    if (code === undefined) return;
    const kind = rec.type === 'fetchCount' ? 'fetch' : rec.type === 'tombstone' ? 'tombstone' : 'share';
    for (const l of this.listeners) l({ kind, code });
  }

  /** Calls `listener` after every durable change that peers must learn of. */
  onChange(listener: (change: ChangeKey) => void): void {
    this.listeners.push(listener);
  }

  /**
   * Applies events replicated from a peer (put_share, fetch_count,
   * tombstone). Events that would change nothing (already applied, beaten
   * by a tombstone, a share already expired) are not written; the others
   * are written and fdatasync'ed before this resolves.
   */
  async applyRemote(records: StoreRecord[]): Promise<RemoteApplyResult> {
    const changed = changedByRemote(this.index, records, this.opts.clock.now());
    // New shares from a peer are refused as a publish here would be (507): the peer retries later.
    if (changed.some((rec) => rec.type === 'putShare' && !this.index.shares.has(rec.share.code)))
      this.checkRoomForShares();
    for (const rec of changed) {
      // Keep our own sequence ahead of every stamp of our origin a peer hands back.
      if (rec.stamp.origin === this.opts.serverId && rec.stamp.seq > this.index.lastSequence)
        this.index.lastSequence = rec.stamp.seq;
    }
    await Promise.all(changed.map((rec) => this.append(rec)));
    return { applied: changed.length, unchanged: records.length - changed.length, changed };
  }

  /** Records durably that `peer` acknowledged `stamps` (per origin, the highest counts). */
  async recordAck(peer: string, stamps: Stamp[]): Promise<void> {
    const vector = this.index.ackVector(peer);
    const byOrigin = new Map(vector.acked.map((a) => [a.origin, a]));
    let moved = false;
    for (const s of stamps) {
      if (laterOfOrigin(s, byOrigin.get(s.origin))) {
        byOrigin.set(s.origin, { origin: s.origin, epoch: s.epoch, seq: s.seq });
        moved = true;
      }
    }
    if (!moved) return;
    // Not an event: it takes no sequence number of its own.
    const stamp = { origin: this.opts.serverId, epoch: this.opts.originEpoch, seq: this.index.lastSequence };
    await this.append({ type: 'replAck', stamp, ack: { peer, acked: [...byOrigin.values()] } });
  }

  /** The highest sequence of `origin` that `peer` acknowledged (0: none). */
  ackedSequence(peer: string, origin: number): number {
    return this.index.acks.get(peer)?.get(origin)?.seq ?? 0;
  }

  /** Every piece of state `peer` has not acknowledged (rebuilds an outbound queue at start-up). */
  pendingFor(peer: string): PendingItem[] {
    return pendingFor(this.index, peer);
  }

  /**
   * The current state behind a change as one replication event, with the
   * stamp of the event that made it; undefined when nothing is left to send
   * (a share deleted meanwhile is sent as its tombstone).
   */
  eventFor(key: ChangeKey): StoreRecord | undefined {
    return eventFor(this.index, key);
  }

  /** Every live share (pending ones included) and every kept tombstone, as events. */
  allEvents(): StoreRecord[] {
    return snapshotEvents(this.index, this.opts.clock.now());
  }

  /**
   * Every share as of now, read lazily (copy on write: share-table.ts);
   * close() it unless it is iterated to the end. A fetch process's copy of
   * the shares starts from it (multi/replica-feed.ts).
   */
  sharesSnapshot(): TableSnapshot {
    return this.index.shares.snapshot();
  }

  /** Codes of the live shares held here, sorted (tests and resync reports). */
  liveCodes(): string[] {
    const now = this.opts.clock.now();
    return [...this.index.shares.values()]
      .filter((s) => s.expiresAt > now)
      .map((s) => s.code)
      .sort();
  }

  /** True when `code` is taken (live, pending, tombstoned or being written). */
  has(code: string): boolean {
    return this.index.shares.has(code) || this.index.tombstones.has(code) || this.reserved.has(code);
  }

  /** Stores a new pending share; resolves once it is durable. */
  async put(input: NewShare): Promise<ShareState> {
    if (this.has(input.code)) throw new StashError('CODE_COLLISION', 'share code already in use');
    this.checkRoomForShares();
    this.reserved.add(input.code);
    const stamp = this.stamp();
    const share: ShareState = { ...input, verifiedAt: 0, fetchCount: 0, stamp };
    try {
      await this.append({ type: 'putShare', stamp, share });
    } finally {
      this.reserved.delete(input.code);
    }
    return share;
  }

  /**
   * New shares stop at budget.publishLimitBytes: the room above it, up to
   * the log's hard limit, keeps confirmations, fetch counts, expiries and
   * replication acknowledgements going while compaction frees space.
   */
  private checkRoomForShares(): void {
    if (this.writer.sizeAccepted < this.budget.publishLimitBytes) return;
    this.publishRefusals++;
    throw new StoreFullError(
      `store.log holds ${this.writer.sizeAccepted} bytes; it takes new shares up to ${this.budget.publishLimitBytes} bytes under the disk cap of ${this.budget.capBytes}`,
    );
  }

  lookup(code: string): Lookup {
    const share = this.index.shares.get(code);
    if (share) {
      if (share.expiresAt <= this.opts.clock.now()) return { state: 'expired' };
      return share.verifiedAt === 0 ? { state: 'pending', share } : { state: 'live', share };
    }
    return this.index.tombstones.has(code) ? { state: 'expired' } : { state: 'missing' };
  }

  /**
   * lookup() for the fetch path, without a copy of the share: its state, and
   * for a share that is here its numbers in `out` (share-table.ts, PEEK_*).
   */
  peek(code: string, out: Float64Array): PeekState {
    if (this.index.shares.peek(code, out) >= 0) {
      if (out[PEEK_EXPIRES_AT]! <= this.opts.clock.now()) return 'expired';
      return out[PEEK_VERIFIED_AT] === 0 ? 'pending' : 'live';
    }
    return this.index.tombstones.has(code) ? 'expired' : 'missing';
  }

  /** The pending, unexpired share a verification token belongs to. */
  findByToken(tokenHash: Buffer): ShareState | undefined {
    const code = this.index.shares.codeOfToken(tokenHash);
    const share = code === undefined ? undefined : this.index.shares.get(code);
    if (share?.verifiedAt !== 0 || share.expiresAt <= this.opts.clock.now()) return undefined;
    return share;
  }

  /** The live, verified share whose verification used this token (a link opened again), if still known. */
  findConfirmedByToken(tokenHash: Buffer): ShareState | undefined {
    const code = this.index.confirmedTokens.get(tokenKey(tokenHash));
    const share = code === undefined ? undefined : this.index.shares.get(code);
    if (!share || share.verifiedAt === 0 || share.expiresAt <= this.opts.clock.now()) return undefined;
    return share;
  }

  /**
   * Marks the token's share verified; resolves with the verified share once
   * durable, or undefined when the token is unknown, used or expired. The
   * token leaves the index before the write, so two concurrent confirmations
   * cannot both succeed.
   */
  async verify(tokenHash: Buffer): Promise<ShareState | undefined> {
    const share = this.findByToken(tokenHash);
    if (!share) return undefined;
    this.index.shares.takeToken(tokenHash);
    try {
      await this.append({ type: 'verify', stamp: this.stamp(), code: share.code, verifiedAt: this.opts.clock.now() });
    } catch (err) {
      const now = this.index.shares.get(share.code);
      if (now && now.verifiedAt === 0) this.index.shares.restoreToken(share.code);
      throw err;
    }
    return this.index.shares.get(share.code);
  }

  /**
   * Counts a fetch of a live share and returns the new count; the count is
   * written shortly after (the index changes only once it is durable, so
   * replication sees the change).
   */
  recordFetch(share: ShareState): number {
    return this.countFetches(share.code, share.fetchCount, 1);
  }

  /**
   * Counts `n` fetches of the live share `code`, whose stored count is
   * `stored`, and returns the new count (recordFetch without a share copy;
   * n > 1: fetches answered by a fetch process, multi/remote-backend.ts).
   */
  countFetches(code: string, stored: number, n: number): number {
    const count = Math.max(this.counted.get(code) ?? 0, stored) + n;
    this.counted.set(code, count);
    this.dirtyFetches.add(code);
    if (this.dirtyFetches.size >= (this.opts.fetchFlushBatch ?? FETCH_FLUSH_BATCH) && !this.closed) {
      if (this.fetchTimer) clearTimeout(this.fetchTimer);
      void this.flushFetches();
    } else if (!this.fetchTimer && !this.closed) {
      this.fetchTimer = setTimeout(() => void this.flushFetches(), this.opts.fetchFlushMs ?? 50);
      this.fetchTimer.unref();
    }
    return count;
  }

  /** Writes every count changed since the last flush: one buffer, one append, however many shares. */
  private async flushFetches(): Promise<void> {
    this.fetchTimer = undefined;
    const recs: Array<StoreRecord & { type: 'fetchCount' }> = [];
    const w = new Writer(48 * this.dirtyFetches.size);
    for (const code of this.dirtyFetches) {
      const count = this.counted.get(code);
      if (!this.index.shares.has(code) || count === undefined) {
        this.counted.delete(code);
        continue;
      }
      const rec = { type: 'fetchCount' as const, stamp: this.stamp(), code, fetchCount: count };
      writeLogRecord(w, rec);
      recs.push(rec);
    }
    this.dirtyFetches.clear();
    if (recs.length === 0) return;
    try {
      await this.writer.append(w.finish(), () => {
        this.records += recs.length;
        for (const rec of recs) this.applyDurable(rec);
      });
    } catch (err) {
      const why = err instanceof Error ? err.message : String(err);
      if (why !== this.flushFailure) {
        this.opts.logger.warn(
          `store: ${recs.length} fetch count update(s) could not be written (${why}); the counts stay in memory and go out with the next fetch of each share`,
        );
      }
      this.flushFailure = why;
      return;
    }
    this.flushFailure = undefined;
    for (const rec of recs) if (this.counted.get(rec.code) === rec.fetchCount) this.counted.delete(rec.code);
    this.maybeCompact();
  }

  /**
   * Deletes a share before its expiry (its publisher's signed unpublish, or
   * a manage link: withdraw.ts) with a tombstone of reason `deleted`, durable
   * before this resolves. It replicates as an expiry's does and beats every
   * put of the code, earlier or later. Resolves with the deletion time, or
   * undefined when the share is not here (any more).
   */
  async withdraw(code: string): Promise<number | undefined> {
    const share = this.index.shares.get(code);
    if (!share) return undefined;
    const now = this.opts.clock.now();
    await this.append({
      type: 'tombstone',
      stamp: this.stamp(),
      code,
      deletedAt: now,
      expiresAt: share.expiresAt,
      reason: 'deleted',
    });
    return now;
  }

  /** Tombstones every expired share and forgets old tombstones. */
  async sweep(): Promise<number> {
    const now = this.opts.clock.now();
    const retention = this.opts.tombstoneRetentionMs ?? 3_600_000;
    for (const [code, t] of this.index.tombstones)
      if (t.deletedAt + retention <= now) this.index.tombstones.delete(code);
    const writes: Array<Promise<void>> = [];
    const expired = this.index.shares.expiredCodes(now);
    // A full store: compaction leaves the expired shares out, which makes room for new ones (and for these tombstones).
    if (expired.length > 0 && this.writer.sizeAccepted >= this.budget.publishLimitBytes) {
      await this.compacting; // one that began before these expired keeps them
      await this.compact();
    }
    for (const code of expired) {
      const share = this.index.shares.get(code);
      if (!share || this.sweeping.has(code)) continue;
      this.sweeping.add(code);
      const rec: StoreRecord = {
        type: 'tombstone',
        stamp: this.stamp(),
        code,
        deletedAt: now,
        expiresAt: share.expiresAt,
        reason: 'expired',
      };
      writes.push(this.append(rec).finally(() => this.sweeping.delete(code)));
    }
    await Promise.all(writes);
    return writes.length;
  }

  /** A new compaction threshold (a configuration reload); checked at the next write. */
  setCompactMinBytes(bytes: number): void {
    this.opts.compactMinBytes = bytes;
  }

  private maybeCompact(): void {
    const size = this.writer.size;
    if (
      this.compacting ||
      this.closed ||
      size < compactionThreshold(this.budget, this.opts.compactMinBytes, this.baseline)
    )
      return;
    void this.compact();
  }

  /** Rewrites the log with only live state; serving continues meanwhile. */
  compact(): Promise<CompactionResult | undefined> {
    if (this.compacting) return this.compacting;
    const run = compactLog({
      dir: this.opts.dir,
      writer: this.writer,
      snapshot: () => indexSnapshot(this.index, this.opts.serverId, this.opts.originEpoch, this.opts.clock.now()),
      now: this.opts.clock.now(),
      syncDir: () => syncDirectory(this.opts.dir),
    })
      .then(
        (result) => {
          this.compactions++;
          this.records = result.records;
          this.baseline = result.newSize;
          this.opts.logger.info(
            `store: compacted ${result.oldSize} -> ${result.newSize} bytes (${result.shares} share(s), ${result.tailBytes} tail bytes)`,
          );
          return result;
        },
        (err) => {
          this.opts.logger.error(
            `store: compaction failed, the old log stays in use: ${err instanceof Error ? err.message : String(err)}`,
          );
          return undefined;
        },
      )
      .finally(() => {
        this.compacting = undefined;
      });
    this.compacting = run;
    return run;
  }

  stats(): StoreStats {
    return {
      sharesLive: this.index.shares.size,
      sharesPending: this.index.pending,
      storeBytes: this.writer.size,
      lastSequence: this.index.lastSequence,
      compactions: this.compactions,
      records: this.records,
      fullRefusals: this.publishRefusals + this.writer.refusedFull,
      originHigh: new Map(this.index.originHigh),
    };
  }

  /** Writes pending fetch counts, waits for compaction, closes the log and the lock. */
  async close(): Promise<void> {
    if (this.closed) return;
    if (this.sweepTimer) clearInterval(this.sweepTimer);
    if (this.fetchTimer) clearTimeout(this.fetchTimer);
    await this.flushFetches();
    this.closed = true;
    await this.compacting;
    await this.writer.close();
    await this.releaseLock();
  }
}
