/**
 * The types ShareStore takes and gives (share-store.ts): its options, a new
 * share, what a lookup finds, the keys and results of replication, what the
 * start-up check found and the store's figures.
 */
import type { Clock } from '../clock.js';
import type { Logger } from '../logger.js';
import type { ShareState, Stamp, StoreRecord } from './records.js';
import type { SkippedRange } from './recovery.js';

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
