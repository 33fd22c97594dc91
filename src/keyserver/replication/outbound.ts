/**
 * The outbound side of replication: one worker per --replication-peer-url
 * (the next server in the ring). The queue is durable because it is the
 * store itself: every change is a durable store record, and what a peer has
 * acknowledged is a durable replAck record (per origin, the highest stamp).
 * At start-up each worker re-queues every share, fetch count and tombstone
 * whose stamp the peer has not acknowledged, so a restart loses nothing.
 *
 * A batch holds the current state of up to 256 changed items, sorted by
 * (origin, origin_epoch, sequence); what is sent of each origin is therefore
 * a prefix of what is pending for it, and "acknowledged up to stamp S" is
 * exact. Items whose origin is the peer itself are not sent back (they are
 * acknowledged on the spot). Failures back off exponentially (0.2 s .. 5 s,
 * with jitter).
 */
import type { Clock } from '../clock.js';
import type { Logger } from '../logger.js';
import type { ChangeKey, ShareStore } from '../store/share-store.js';
import type { Stamp, StoreRecord } from '../store/records.js';
import { compareStamps } from '../store/share-index.js';
import { MAX_BATCH_EVENTS } from './batch.js';
import { sendBatch } from './transport.js';

export interface ReplicationSettings {
  serverId: number;
  clusterId: string;
  token: string;
  /** Peer URLs with the server id they are known by (from the topology), if any. */
  peers: Array<{ url: string; serverId: number | undefined }>;
  minBackoffMs?: number;
  maxBackoffMs?: number;
  timeoutMs?: number;
}

export interface PeerStatus {
  url: string;
  server_id: number | null;
  pending: number;
  /** Highest sequence of this server's own events the peer acknowledged. */
  acked_sequence: number;
  /** replication_last_sequence minus acked_sequence. */
  lag_sequences: number;
  /** Age of the oldest unacknowledged item, in ms (0 when nothing is pending). */
  lag_ms: number;
  last_ok_at: string | null;
  last_error: string | null;
  sent_events: number;
  /** Attempts that failed since start (a dead peer: one every 5 s). */
  failed_attempts: number;
}

const keyOf = (c: ChangeKey) => `${c.kind}:${c.code}`;

let lastStream = 0;
/**
 * A replication stream id of its own for each worker of each process: the
 * time it was made, in ms (made unique within the process). Not origin_epoch:
 * that may be fixed in the configuration, and a restarted sender that went on
 * with an old stream from batch 1 would be refused as a replay by its peer
 * (which remembers the stream's highest batch) until it caught up with it.
 */
function newStream(): number {
  lastStream = Math.max(lastStream + 1, Date.now());
  return lastStream;
}

class PeerWorker {
  private readonly dirty = new Map<string, { key: ChangeKey; since: number }>();
  private wake: (() => void) | undefined;
  private stopWake: (() => void) | undefined;
  private stopped = false;
  private abort = new AbortController();
  private readonly stream = newStream();
  private batchSeq = 0;
  private failures = 0;
  private loop: Promise<void> | undefined;
  private lastOkAt: number | undefined;
  private lastError: string | undefined;
  private sentEvents = 0;
  private failedAttempts = 0;
  private ackedOwn = 0;

  constructor(
    readonly url: string,
    private peerId: number | undefined,
    private readonly s: ReplicationSettings,
    private readonly store: ShareStore,
    private readonly clock: Clock,
    private readonly logger: Logger,
  ) {}

  start(): void {
    const now = this.clock.now();
    for (const item of this.store.pendingFor(this.url)) this.dirty.set(keyOf(item), { key: item, since: now });
    this.ackedOwn = this.store.ackedSequence(this.url, this.s.serverId);
    if (this.dirty.size > 0) this.logger.info(`replication: ${this.dirty.size} item(s) pending for ${this.url}`);
    this.loop = this.run();
  }

  mark(change: ChangeKey): void {
    const k = keyOf(change);
    if (!this.dirty.has(k)) this.dirty.set(k, { key: change, since: this.clock.now() });
    this.wake?.();
  }

  get pending(): number {
    return this.dirty.size;
  }

  status(lastSequence: number): PeerStatus {
    const now = this.clock.now();
    let oldest = now;
    for (const d of this.dirty.values()) oldest = Math.min(oldest, d.since);
    return {
      url: this.url,
      server_id: this.peerId ?? null,
      pending: this.dirty.size,
      acked_sequence: this.ackedOwn,
      lag_sequences: Math.max(0, lastSequence - this.ackedOwn),
      lag_ms: now - oldest,
      last_ok_at: this.lastOkAt === undefined ? null : new Date(this.lastOkAt).toISOString(),
      last_error: this.lastError ?? null,
      sent_events: this.sentEvents,
      failed_attempts: this.failedAttempts,
    };
  }

  /** Sleeps `ms`, or without `ms` until a change arrives; stop() ends either. A backoff is not cut short by changes. */
  private sleep(ms?: number): Promise<void> {
    return new Promise<void>((resolve) => {
      let timer: NodeJS.Timeout | undefined;
      const done = () => {
        this.wake = undefined;
        this.stopWake = undefined;
        if (timer) clearTimeout(timer);
        resolve();
      };
      if (ms !== undefined) timer = setTimeout(done, ms);
      else this.wake = done;
      this.stopWake = done;
    });
  }

  /** The next batch: current state of the earliest pending items, and the items skipped as the peer's own. */
  private nextBatch(): {
    events: StoreRecord[];
    keys: Array<{ k: string; stamp: Stamp }>;
    skipped: Array<{ k: string; stamp: Stamp }>;
  } {
    const all: Array<{ k: string; ev: StoreRecord }> = [];
    for (const [k, d] of this.dirty) {
      const ev = this.store.eventFor(d.key);
      if (!ev) this.dirty.delete(k);
      else all.push({ k, ev });
    }
    all.sort((a, b) => a.ev.stamp.origin - b.ev.stamp.origin || compareStamps(a.ev.stamp, b.ev.stamp));
    const events: StoreRecord[] = [];
    const keys: Array<{ k: string; stamp: Stamp }> = [];
    const skipped: Array<{ k: string; stamp: Stamp }> = [];
    for (const { k, ev } of all) {
      if (this.peerId !== undefined && ev.stamp.origin === this.peerId) {
        skipped.push({ k, stamp: ev.stamp });
        continue;
      }
      if (events.length >= MAX_BATCH_EVENTS) break;
      events.push(ev);
      keys.push({ k, stamp: ev.stamp });
    }
    return { events, keys, skipped };
  }

  private async run(): Promise<void> {
    while (!this.stopped) {
      if (this.dirty.size === 0) {
        await this.sleep(undefined);
        continue;
      }
      const { events, keys, skipped } = this.nextBatch();
      try {
        if (events.length > 0) {
          const ack = await sendBatch(
            this.url,
            this.s.token,
            {
              clusterId: this.s.clusterId,
              sender: this.s.serverId,
              stream: this.stream,
              batchSeq: ++this.batchSeq,
              flags: 0,
              events,
            },
            { nowMs: this.clock.now(), timeoutMs: this.s.timeoutMs ?? 10_000, signal: this.abort.signal },
          );
          if (this.peerId === undefined) this.peerId = ack.serverId;
          this.sentEvents += events.length;
        }
        const done = [...keys, ...skipped];
        await this.store.recordAck(
          this.url,
          done.map((d) => d.stamp),
        );
        for (const d of done) {
          const cur = this.dirty.get(d.k);
          const ev = cur && this.store.eventFor(cur.key);
          if (!ev || compareStamps(ev.stamp, d.stamp) === 0) this.dirty.delete(d.k);
        }
        this.ackedOwn = this.store.ackedSequence(this.url, this.s.serverId);
        if (this.failures > 0)
          this.logger.info(`replication: ${this.url} reachable again; ${this.dirty.size} item(s) pending`);
        this.failures = 0;
        this.lastOkAt = this.clock.now();
        this.lastError = undefined;
      } catch (err) {
        if (this.stopped) return;
        const message = err instanceof Error ? err.message : String(err);
        if (this.failures === 0 || message !== this.lastError)
          this.logger.warn(`replication: sending to ${this.url} failed: ${message}; retrying with backoff`);
        this.lastError = message;
        this.failures++;
        this.failedAttempts++;
        const min = this.s.minBackoffMs ?? 200;
        const max = this.s.maxBackoffMs ?? 5_000;
        const base = Math.min(max, min * 2 ** Math.min(this.failures - 1, 20));
        await this.sleep(Math.round(base * (0.75 + Math.random() * 0.5)));
      }
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.abort.abort();
    this.stopWake?.();
    await this.loop;
  }
}

/** All outbound workers of a server, fed by the store's change notifications. */
export class Replicator {
  private readonly workers: PeerWorker[];

  constructor(
    s: ReplicationSettings,
    private readonly store: ShareStore,
    clock: Clock,
    logger: Logger,
  ) {
    this.workers = s.peers.map((p) => new PeerWorker(p.url, p.serverId, s, store, clock, logger));
  }

  start(): void {
    this.store.onChange((change) => {
      for (const w of this.workers) w.mark(change);
    });
    for (const w of this.workers) w.start();
  }

  /** Items not yet acknowledged, summed over the peers (replication_pending). */
  pending(): number {
    return this.workers.reduce((n, w) => n + w.pending, 0);
  }

  peers(): PeerStatus[] {
    const last = this.store.stats().lastSequence;
    return this.workers.map((w) => w.status(last));
  }

  async stop(): Promise<void> {
    await Promise.all(this.workers.map((w) => w.stop()));
  }
}
