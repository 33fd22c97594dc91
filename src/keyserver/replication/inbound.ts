/**
 * The receiving side of POST /v1/replicate. Checks, in this order, so that
 * nothing is applied unless all pass:
 *
 * 1. replication is configured here (a token), else 401;
 * 2. the HMAC signature verifies (constant-time compare), else 401
 *    REPLICATION_UNAUTHORIZED ("ReplicationUnauthorized");
 * 3. the signed timestamp is within +-5 minutes of our clock, else 401
 *    REPLICATION_STALE;
 * 4. the signed cluster id (header and body) is ours, else 403
 *    REPLICATION_FORBIDDEN; so is a sender that is not a topology entry (or
 *    is this server itself);
 * 5. the batch sequence is above the high-water mark of the sender's stream,
 *    else 409 REPLICATION_REPLAY (a captured request cannot be played again);
 * 6. the events decode (400 otherwise), then are applied by the store's merge
 *    rules: an event already applied changes nothing.
 *
 * Events that changed the state here become changes of this server's store,
 * so the outbound worker forwards them along the ring (not back to their
 * origin).
 */
import { KeyServerError, MalformedRequestError } from '../errors.js';
import type { Logger } from '../logger.js';
import { parseShareCode } from '../share-code.js';
import type { ShareStore } from '../store/share-store.js';
import type { TopologyServer } from '../server-config.js';
import { FLAG_RESYNC, decodeBatch, type ReplicateAck } from './batch.js';
import { CLUSTER_HEADER, SIGNATURE_HEADER, TIMESTAMP_HEADER, verifyMac } from './signature.js';

export const MAX_CLOCK_SKEW_MS = 5 * 60_000;
const MAX_STREAMS = 1024;

export interface ReceiverConfig {
  serverId: number;
  clusterId: string;
  token: string | undefined;
  topologyServers: TopologyServer[];
}

/** Counters of what peers sent (for status). */
export interface InboundStats {
  batches: number;
  applied: number;
  unchanged: number;
  refused: number;
}

export class ReplicationReceiver {
  /** `${sender}/${stream}` -> [highest batch sequence, when last used]. */
  private readonly streams = new Map<string, { seq: number; at: number }>();
  readonly stats: InboundStats = { batches: 0, applied: 0, unchanged: 0, refused: 0 };

  constructor(
    private readonly c: ReceiverConfig,
    private readonly store: ShareStore,
    private readonly logger: Logger,
  ) {}

  private refuse(code: string, message: string): never {
    this.stats.refused++;
    throw new KeyServerError(code, message);
  }

  /** Checks and applies one request; throws a KeyServerError for the error middleware. */
  async receive(
    headers: Record<string, string | string[] | undefined>,
    body: Uint8Array,
    nowMs: number,
  ): Promise<ReplicateAck> {
    const header = (name: string) => {
      const v = headers[name];
      return Array.isArray(v) ? undefined : v;
    };
    const token = this.c.token;
    if (token === undefined)
      this.refuse(
        'REPLICATION_UNAUTHORIZED',
        'ReplicationUnauthorized: replication is not enabled on this server (no --replication-token)',
      );
    const timestamp = header(TIMESTAMP_HEADER) ?? '';
    const clusterId = header(CLUSTER_HEADER) ?? '';
    if (!/^[0-9]{1,16}$/.test(timestamp) || !verifyMac(token, header(SIGNATURE_HEADER), timestamp, clusterId, body)) {
      this.refuse(
        'REPLICATION_UNAUTHORIZED',
        "ReplicationUnauthorized: the replication signature does not verify with this server's replication token",
      );
    }
    if (Math.abs(nowMs - Number(timestamp)) > MAX_CLOCK_SKEW_MS) {
      this.refuse(
        'REPLICATION_STALE',
        `ReplicationUnauthorized: the request timestamp is more than ${MAX_CLOCK_SKEW_MS / 60_000} minutes away from this server's clock (stale or replayed, or clocks out of sync)`,
      );
    }
    const batch = decodeBatch(body, (m) => new MalformedRequestError(m));
    if (clusterId !== this.c.clusterId || batch.clusterId !== clusterId) {
      this.refuse(
        'REPLICATION_FORBIDDEN',
        `this server belongs to cluster ${JSON.stringify(this.c.clusterId)}, the request to ${JSON.stringify(clusterId.slice(0, 64))}`,
      );
    }
    if (batch.sender === this.c.serverId) {
      this.refuse(
        'REPLICATION_FORBIDDEN',
        `the request claims to come from server ${batch.sender}, this server's own id (resync-peer needs the --server-id of the node whose state it sends)`,
      );
    }
    if (!this.allowed(batch.sender))
      this.refuse(
        'REPLICATION_FORBIDDEN',
        `server ${batch.sender} is not an allowed replication peer of server ${this.c.serverId}`,
      );
    const streamKey = `${batch.sender}/${batch.stream}`;
    const seen = this.streams.get(streamKey);
    if (seen && batch.batchSeq <= seen.seq) {
      this.refuse(
        'REPLICATION_REPLAY',
        `replayed replication request (batch ${batch.batchSeq} of server ${batch.sender}, already at ${seen.seq})`,
      );
    }
    this.remember(streamKey, batch.batchSeq, nowMs);
    for (const ev of batch.events) {
      const code = ev.type === 'putShare' ? ev.share.code : 'code' in ev ? ev.code : '';
      let canonical: string;
      try {
        canonical = parseShareCode(code).canonical;
      } catch {
        throw new MalformedRequestError('replication batch: an event carries a malformed share code');
      }
      if (canonical !== code)
        throw new MalformedRequestError('replication batch: an event carries a non-canonical share code');
    }
    const result = await this.store.applyRemote(batch.events);
    this.stats.batches++;
    this.stats.applied += result.applied;
    this.stats.unchanged += result.unchanged;
    if (batch.flags & FLAG_RESYNC)
      this.logger.info(
        `replication: resync batch ${batch.batchSeq} from server ${batch.sender}: ${result.applied} applied, ${result.unchanged} unchanged`,
      );
    return { serverId: this.c.serverId, applied: result.applied, unchanged: result.unchanged };
  }

  private allowed(sender: number): boolean {
    if (this.c.topologyServers.length === 0) return true;
    // Any listed server, `disabled` included: during a failover the old primary is disabled for clients, yet it
    // must be able to send what it queued while it was away (runbook step 4).
    return this.c.topologyServers.some((s) => s.id === sender);
  }

  private remember(key: string, seq: number, now: number): void {
    this.streams.set(key, { seq, at: now });
    if (this.streams.size <= MAX_STREAMS) return;
    // Streams idle for longer than the timestamp window can no longer be replayed (stale): forget them first.
    for (const [k, v] of this.streams) if (now - v.at > 2 * MAX_CLOCK_SKEW_MS) this.streams.delete(k);
    while (this.streams.size > MAX_STREAMS) this.streams.delete(this.streams.keys().next().value!);
  }
}
