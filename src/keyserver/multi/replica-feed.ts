/**
 * The store's process's side of the fetch processes' copies of the live
 * shares (multi/replica.ts). A fetch process that starts gets every
 * verified, unexpired share, read lazily from the share table (copy on
 * write, as compaction reads it) in chunks of CHUNK_BYTES, the event loop
 * turning between chunks so that serving goes on. After that, and meanwhile,
 * every durable change of a share, fetch count or tombstone, whatever its
 * origin (a publish or confirmation here, a fetch count flush, a record
 * replicated from a peer, the expiry sweep), is sent as the record of the
 * share's state now, batched per event-loop turn. A change made while a
 * snapshot is read is sent again after it, so the copy ends at the state of
 * the store.
 */
import { setImmediate as turn } from 'node:timers/promises';
import type { StoreRecord } from '../store/records.js';
import { writeRecord } from '../store/records.js';
import type { ChangeKey, ShareStore } from '../store/share-store.js';
import { Writer } from '../wire/codec.js';
import type { Channel } from './channel.js';

const CHUNK_BYTES = 256 * 1024;

interface Target {
  channel: Channel;
  /** Changes made while the snapshot is being read (undefined once it has been sent). */
  backlog: Map<string, ChangeKey> | undefined;
}

/** A record a fetch process may hold: shares only once verified, never a token hash. */
function forReplica(rec: StoreRecord | undefined, now: number): StoreRecord | undefined {
  if (!rec) return undefined;
  if (rec.type !== 'putShare') return rec;
  if (rec.share.verifiedAt === 0 || rec.share.expiresAt <= now) return undefined;
  return { ...rec, share: { ...rec.share, tokenHash: undefined } };
}

export class ReplicaFeed {
  private readonly targets = new Set<Target>();
  private pending = new Map<string, ChangeKey>();
  private scheduled = false;

  constructor(
    private readonly store: ShareStore,
    private readonly now: () => number,
  ) {
    store.onChange((key) => {
      if (this.targets.size === 0) return;
      const id = `${key.kind}:${key.code}`;
      this.pending.set(id, key);
      for (const t of this.targets) t.backlog?.set(id, key);
      if (!this.scheduled) {
        this.scheduled = true;
        setImmediate(() => this.flush());
      }
    });
  }

  /**
   * Sends `channel` the live shares of the store, then keeps it up to date
   * until detach(); resolves once the snapshot is sent (the 'replica-done'
   * note follows it on the channel).
   */
  async attach(channel: Channel): Promise<() => void> {
    const target: Target = { channel, backlog: new Map() };
    this.targets.add(target);
    const detach = () => {
      this.targets.delete(target);
    };
    let w = new Writer(CHUNK_BYTES + 4096);
    const snapshot = this.store.sharesSnapshot();
    let shares = 0;
    try {
      const now = this.now();
      for (const share of snapshot) {
        const rec = forReplica({ type: 'putShare', stamp: share.stamp, share }, now);
        if (!rec) continue;
        writeRecord(w, rec);
        shares++;
        if (w.length >= CHUNK_BYTES) {
          if (!channel.connected) return detach;
          channel.note('replica', w.finish());
          w = new Writer(CHUNK_BYTES + 4096);
          await turn();
        }
      }
    } finally {
      snapshot.close();
    }
    if (w.length > 0) channel.note('replica', w.finish());
    const backlog = target.backlog!;
    target.backlog = undefined;
    this.send([target], backlog.values());
    channel.note('replica-done', shares);
    return detach;
  }

  private flush(): void {
    this.scheduled = false;
    const keys = this.pending;
    this.pending = new Map();
    this.send(
      [...this.targets].filter((t) => t.backlog === undefined),
      keys.values(),
    );
  }

  private send(targets: Target[], keys: Iterable<ChangeKey>): void {
    if (targets.length === 0) return;
    const now = this.now();
    const w = new Writer(4096);
    for (const key of keys) {
      const rec = forReplica(this.store.eventFor(key), now);
      if (rec) writeRecord(w, rec);
    }
    if (w.length === 0) return;
    const bytes = w.finish();
    for (const t of targets) t.channel.note('replica', bytes);
  }
}
