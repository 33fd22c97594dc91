/**
 * What replication reads from the store's index: the events a peer has not
 * acknowledged, the event behind a change, and which replicated events would
 * change anything here. Reads only; ShareStore writes (share-store.ts).
 */
import type { StoreRecord } from './records.js';
import { tombstoneRecord, type ShareIndex } from './share-index.js';
import type { ChangeKey, PendingItem } from './store-types.js';

/**
 * The events of a replicated batch that change the state here (judged against the state before the batch).
 * A share already expired at `now` is left out.
 */
export function changedByRemote(index: ShareIndex, records: StoreRecord[], now: number): StoreRecord[] {
  const changed: StoreRecord[] = [];
  // Events are judged against the state before the batch; a later event on a code an earlier one changed
  // (a put, then its fetch count) is kept as well, and apply() merges it in order.
  const touched = new Set<string>();
  for (const rec of records) {
    if (rec.type === 'putShare' && rec.share.expiresAt <= now) continue;
    const code = rec.type === 'putShare' ? rec.share.code : 'code' in rec ? rec.code : '';
    if (touched.has(code) || index.wouldChange(rec)) {
      changed.push(rec);
      touched.add(code);
    }
  }
  return changed;
}

/** Every piece of state `peer` has not acknowledged (rebuilds an outbound queue at start-up). */
export function pendingFor(index: ShareIndex, peer: string): PendingItem[] {
  const out: PendingItem[] = [];
  for (const s of index.shares.values()) {
    if (index.unacked(peer, s.stamp)) out.push({ kind: 'share', code: s.code, stamp: s.stamp });
    if (s.fetchStamp && index.unacked(peer, s.fetchStamp))
      out.push({ kind: 'fetch', code: s.code, stamp: s.fetchStamp });
  }
  for (const t of index.tombstones.values()) {
    if (index.unacked(peer, t.stamp)) out.push({ kind: 'tombstone', code: t.code, stamp: t.stamp });
  }
  return out;
}

/**
 * The current state behind a change as one replication event, with the
 * stamp of the event that made it; undefined when nothing is left to send
 * (a share deleted meanwhile is sent as its tombstone).
 */
export function eventFor(index: ShareIndex, key: ChangeKey): StoreRecord | undefined {
  const share = index.shares.get(key.code);
  const tomb = index.tombstones.get(key.code);
  if (key.kind === 'tombstone' || (!share && tomb)) {
    return tomb && tombstoneRecord(tomb);
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
