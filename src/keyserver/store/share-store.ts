/**
 * The key server's in-process database: an append-only, checksummed log in
 * the state directory (records.ts), an in-memory index (share-index.ts), group
 * commit (log-writer.ts), a startup check (recovery.ts) and background
 * compaction (compaction.ts).
 *
 * Durability: a publish and a verification resolve only after their record is
 * fdatasync'ed. Fetch counts are NOT awaited: the fetch path is a Map lookup
 * plus a counter increment; changed counts are written in one coalesced batch
 * every `fetchFlushMs` (default 50 ms), or as soon as `fetchFlushBatch`
 * shares have changed counts. A crash can lose the count increments
 * of the last batch, never a share or a verification. Counts merge by maximum.
 *
 * Several processes later: the log is self-delimiting and checksummed, so
 * reader processes can tail it to keep their own index for fetches while one
 * writer process owns appends (docs/key-server.md, "Scaling fetches").
 */
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { Clock } from '../clock.js';
import type { Logger } from '../logger.js';
import { StashError } from '../../errors.js';
import { DEFAULT_DISK_CAP_BYTES, compactionThreshold, diskBudget, type DiskBudget } from '../disk/budget.js';
import { pruneDamagedCopies } from '../disk/damaged-copies.js';
import { StoreFullError } from '../errors.js';
import { compactLog, type CompactionResult } from './compaction.js';
import { LogWriter } from './log-writer.js';
import { Writer } from '../wire/codec.js';
import { encodeLogRecord, writeLogRecord } from './log-format.js';
import type { ShareState, Stamp, StoreRecord } from './records.js';
import { openAndRecover, type SkippedRange } from './recovery.js';
import { ShareIndex, laterOfOrigin, snapshotEvents, tokenKey } from './share-index.js';
import { PEEK_EXPIRES_AT, PEEK_VERIFIED_AT, type TableSnapshot } from './share-table.js';
import { COMPACT_NAME, LOG_NAME, REPAIR_NAME, lockStateDir, prepareStateDir, syncDirectory } from './state-dir.js';

export interface StoreOptions {
  dir: string;
  serverId: number;
  originEpoch: number;
  compactMinBytes: number;
  /** The server's disk cap (disk/budget.ts): bounds store.log and the damaged copies; default 100 MB. */
  diskCapBytes?: number;
  clock: Clock;
  logger: Logger;
  /** How often expired shares are tombstoned (default 30 s; 0 = only by sweep()). */
  sweepIntervalMs?: number;
  /** Coalescing delay of fetch-count records (default 50 ms). */
  fetchFlushMs?: number;
  /** Shares with unwritten fetch counts that start a write before the delay is over (default FETCH_FLUSH_BATCH). */
  fetchFlushBatch?: number;
  /** How long a tombstone is kept after deletion (default 1 h). */
  tombstoneRetentionMs?: number;
}

export interface NewShare {
  code: string;
  publicKey: Buffer;
  email: string;
  createdAt: number;
  expiresAt: number;
  tokenHash: Buffer;
}

/** What peek() finds: lookup()'s states, without the share. */
export type PeekState = 'live' | 'pending' | 'expired' | 'missing';

export type Lookup =
  | { state: 'live'; share: ShareState }
  | { state: 'pending'; share: ShareState }
  | { state: 'expired' }
  | { state: 'missing' };

/** A piece of state that replication must carry to peers. */
export interface ChangeKey {
  kind: 'share' | 'fetch' | 'tombstone';
  code: string;
}

/** A change waiting for a peer: the key and the stamp it had when queued. */
export interface PendingItem extends ChangeKey {
  stamp: Stamp;
}

/** Result of applying a batch of replicated events. */
export interface RemoteApplyResult {
  applied: number;
  unchanged: number;
  /** The events that changed the state here (to be forwarded along the ring). */
  changed: StoreRecord[];
}

/** What the start-up check found: records read, byte ranges it had to skip, where the damaged file went. */
export interface StoreRecovery {
  records: number;
  skipped: SkippedRange[];
  damagedCopy: string | undefined;
  startedEmpty: boolean;
}

export interface StoreStats {
  sharesLive: number;
  sharesPending: number;
  storeBytes: number;
  lastSequence: number;
  compactions: number;
  /** Records in store.log (read at start-up, appended since, or written by the last compaction). */
  records: number;
  /** Writes refused because the store had reached its share of the disk cap (STORE_FULL). */
  fullRefusals: number;
  /** Per origin, the highest stamp seen. */
  originHigh: Map<number, Stamp>;
}

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
      // A compaction or repair interrupted by a crash never renamed its file: the log is intact.
      await rm(join(opts.dir, COMPACT_NAME), { force: true });
      await rm(join(opts.dir, REPAIR_NAME), { force: true });
      const result = await openAndRecover(
        join(opts.dir, LOG_NAME),
        (rec) => store.index.apply(rec),
        opts.logger,
        () => syncDirectory(opts.dir),
        undefined,
        join(opts.dir, REPAIR_NAME),
      );
      store.writer = new LogWriter(result.handle, result.size, opts.logger, store.budget.storeLogHardBytes);
      store.records = result.records + result.skippedUnknown;
      // 0, not the loaded size: a big log inherited from before a restart is compacted at the threshold.
      store.baseline = 0;
      store.recovery = {
        records: result.records,
        skipped: result.skipped,
        damagedCopy: result.damagedCopy,
        startedEmpty: result.startedEmpty,
      };
      opts.logger.info(
        `store: ${result.records} record(s) read from ${join(opts.dir, LOG_NAME)} (${result.size} bytes); ` +
          `${store.index.shares.size} share(s), ${store.index.pending} pending verification`,
      );
      await pruneDamagedCopies(
        opts.dir,
        { maxCount: store.budget.damagedCount, maxBytes: store.budget.damagedBytes },
        opts.logger,
      );
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
    const now = this.opts.clock.now();
    const changed: StoreRecord[] = [];
    // Events are judged against the state before the batch; a later event on a code an earlier one changed
    // (a put, then its fetch count) is kept as well, and apply() merges it in order.
    const touched = new Set<string>();
    for (const rec of records) {
      if (rec.type === 'putShare' && rec.share.expiresAt <= now) continue;
      const code = rec.type === 'putShare' ? rec.share.code : 'code' in rec ? rec.code : '';
      if (touched.has(code) || this.index.wouldChange(rec)) {
        changed.push(rec);
        touched.add(code);
      }
    }
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
    const out: PendingItem[] = [];
    for (const s of this.index.shares.values()) {
      if (this.index.unacked(peer, s.stamp)) out.push({ kind: 'share', code: s.code, stamp: s.stamp });
      if (s.fetchStamp && this.index.unacked(peer, s.fetchStamp))
        out.push({ kind: 'fetch', code: s.code, stamp: s.fetchStamp });
    }
    for (const t of this.index.tombstones.values()) {
      if (this.index.unacked(peer, t.stamp)) out.push({ kind: 'tombstone', code: t.code, stamp: t.stamp });
    }
    return out;
  }

  /**
   * The current state behind a change as one replication event, with the
   * stamp of the event that made it; undefined when nothing is left to send
   * (a share deleted meanwhile is sent as its tombstone).
   */
  eventFor(key: ChangeKey): StoreRecord | undefined {
    const share = this.index.shares.get(key.code);
    const tomb = this.index.tombstones.get(key.code);
    if (key.kind === 'tombstone' || (!share && tomb)) {
      return (
        tomb && {
          type: 'tombstone',
          stamp: tomb.stamp,
          code: tomb.code,
          deletedAt: tomb.deletedAt,
          expiresAt: tomb.expiresAt,
          reason: tomb.reason,
        }
      );
    }
    if (!share) return undefined;
    if (key.kind === 'fetch') {
      return (
        share.fetchStamp && {
          type: 'fetchCount',
          stamp: share.fetchStamp,
          code: share.code,
          fetchCount: share.fetchCount,
        }
      );
    }
    return { type: 'putShare', stamp: share.stamp, share };
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
      snapshot: () => ({
        shares: this.index.shares.snapshot(),
        tombstones: [...this.index.tombstones.values()],
        acks: [...this.index.acks.keys()].map((peer) => ({
          type: 'replAck' as const,
          stamp: { origin: this.opts.serverId, epoch: this.opts.originEpoch, seq: this.index.lastSequence },
          ack: this.index.ackVector(peer),
        })),
        checkpoint: {
          type: 'checkpoint',
          stamp: { origin: this.opts.serverId, epoch: this.opts.originEpoch, seq: this.index.lastSequence },
          writtenAt: this.opts.clock.now(),
        },
      }),
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
