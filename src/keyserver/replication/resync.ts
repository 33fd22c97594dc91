/**
 * `stash_key_server resync-peer --peer-url URL [run options]`: streams the
 * state of the local state folder (every live share, pending verifications
 * with their token hashes, and the kept tombstones) to a peer's
 * /v1/replicate as signed replication events. The folder is read without its
 * lock, so this runs beside the server that owns it. The peer applies the
 * events by its merge rules: what it already has is left unchanged.
 */
import { UsageError } from '../../errors.js';
import type { ServerConfig } from '../server-config.js';
import type { Clock } from '../clock.js';
import type { Logger } from '../logger.js';
import { readStateReadOnly } from '../store/read-only.js';
import { snapshotEvents } from '../store/share-index.js';
import { FLAG_RESYNC, MAX_BATCH_EVENTS } from './batch.js';
import { ReplicationSendError, sendBatch } from './transport.js';

export interface ResyncResult {
  shares: number;
  pending: number;
  tombstones: number;
  batches: number;
  applied: number;
  unchanged: number;
  peerServerId: number | undefined;
}

export interface ResyncOptions {
  clock: Clock;
  logger: Logger;
  /** Attempts per batch before giving up (default 5), and the first backoff (default 500 ms, doubling). */
  attempts?: number;
  backoffMs?: number;
}

const retryable = (err: unknown) =>
  err instanceof ReplicationSendError && (err.status === 0 || err.status >= 500 || err.status === 429);

export async function resyncPeer(config: ServerConfig, opts: ResyncOptions): Promise<ResyncResult> {
  const peerUrl = config.peerUrl;
  if (peerUrl === undefined) throw new UsageError("resync-peer needs --peer-url URL (the peer's /v1/replicate URL)");
  const token = config.replicationToken;
  if (token === undefined) throw new UsageError("resync-peer needs --replication-token (the cluster's shared token)");
  const state = await readStateReadOnly(config.stateDir, config.serverId);
  if (state.skipped)
    opts.logger.warn(`resync-peer: read ${state.records} record(s) of ${config.stateDir}; skipped ${state.skipped}`);
  const events = snapshotEvents(state.index, opts.clock.now());
  const result: ResyncResult = {
    shares: 0,
    pending: 0,
    tombstones: 0,
    batches: 0,
    applied: 0,
    unchanged: 0,
    peerServerId: undefined,
  };
  for (const ev of events) {
    if (ev.type === 'tombstone') result.tombstones++;
    else if (ev.type === 'putShare') {
      result.shares++;
      if (ev.share.verifiedAt === 0) result.pending++;
    }
  }
  const stream = opts.clock.now();
  let batchSeq = 0;
  for (let i = 0; i < events.length || (i === 0 && batchSeq === 0); i += MAX_BATCH_EVENTS) {
    const slice = events.slice(i, i + MAX_BATCH_EVENTS);
    for (let attempt = 1; ; attempt++) {
      try {
        const ack = await sendBatch(
          peerUrl,
          token,
          {
            clusterId: config.clusterId,
            sender: config.serverId,
            stream,
            batchSeq: ++batchSeq,
            flags: FLAG_RESYNC,
            events: slice,
          },
          { nowMs: opts.clock.now() },
        );
        result.batches++;
        result.applied += ack.applied;
        result.unchanged += ack.unchanged;
        result.peerServerId = ack.serverId;
        break;
      } catch (err) {
        if (!retryable(err) || attempt >= (opts.attempts ?? 5)) throw err;
        const wait = (opts.backoffMs ?? 500) * 2 ** (attempt - 1);
        opts.logger.warn(`resync-peer: ${(err as Error).message}; retrying in ${wait} ms`);
        await new Promise((r) => setTimeout(r, wait));
      }
    }
  }
  return result;
}
