/**
 * The backend of a fetch process (docs/benchmarks.md, "Multi-core fetch"):
 * fetches of live shares are answered here from the process's copy of them
 * (replica.ts), everything else is asked of the store's process, which holds
 * the one store.
 *
 * - A fetch of a share that is live in the copy is answered here with no
 *   message to anyone. Any other fetch (pending, unknown, expired, or
 *   confirmed a moment ago and not in the copy yet) is a call to the store's
 *   process, which decides, counts it and answers; so a share confirmed
 *   through either process is fetchable through this one at once.
 * - Such a call hands over the request tokens this process took from the
 *   client's address and has not reported yet, and the store's process
 *   charges a miss (or refuses it, 429) against its own bucket of that
 *   address, which every miss of every process goes through
 *   (http/share-fetch.ts, settleForwardedMiss).
 * - Fetches answered here are counted here and sent to the store's process
 *   every COUNT_FLUSH_MS; its answer (the count now, fetches through every
 *   process) and the counts in the copy (written by the store each second)
 *   are the base of the counts shown here. A count shown may lag the other
 *   processes' fetches by that long; the stored count is the sum of all.
 * - Publish, confirm, the verification page, status, replication, unpublish
 *   and manage links are calls, answered by the store's process's service
 *   exactly as there. A deletion reaches this process's copy as the
 *   tombstone it wrote, so the share is not answered here afterwards.
 */
import type { IncomingHttpHeaders } from 'node:http';
import type { KeyServerBackend, StatusReport } from '../backend.js';
import type { Clock } from '../clock.js';
import type { FetchClient } from '../http/share-fetch.js';
import type { ProcessMetrics } from '../metrics/process-metrics.js';
import type { ReplicateAck } from '../replication/batch.js';
import { checkServed, topologyOf } from '../owner-routing.js';
import type { VerificationView } from '../service.js';
import type { ServiceConfig } from '../server-config.js';
import { ParsedCodes } from '../share-code.js';
import { PEEK_FETCH_COUNT, PEEK_SIZE } from '../store/share-table.js';
import { FetchedCache, type FetchedEncoding, type FetchedFacts } from '../wire/fetched-cache.js';
import type { CreatedResponse, TopologyResponse, UnpublishRequest, UnpublishedResponse } from '../wire/messages.js';
import type { ManageView } from '../withdraw.js';
import type { Channel } from './channel.js';
import type { Replica } from './replica.js';

/** How often fetch counts go to the store's process (the store itself writes them every FETCH_FLUSH_MS). */
export const COUNT_FLUSH_MS = 100;
/** Counts from the store's answers kept at most (the copy's counts catch up within a second anyway). */
const BASES_KEPT = 16_384;

/** A fetch asked of the store's process: the code as sent, and the client's address with the tokens taken for it here (handed over). */
export interface ForwardedFetchCall {
  code: string;
  client?: { key: string; taken: number };
}

/** What the store's process answers to a fetch it counted for this process. */
export interface ForwardedFetch {
  facts: FetchedFacts;
  version: Float64Array;
  count: number;
}

export class RemoteBackend implements KeyServerBackend {
  /** Fetches answered here and not yet sent, by canonical code. */
  private unsent = new Map<string, number>();
  /** Those sent and not yet answered. */
  private sending = new Map<string, number>();
  /** The count the store's process last said, by canonical code (every fetch through here sent before it included). */
  private readonly bases = new Map<string, number>();
  private readonly cache = new FetchedCache();
  private readonly parsed = new ParsedCodes();
  private readonly version = new Float64Array(PEEK_SIZE);
  private flushTimer: NodeJS.Timeout | undefined;
  private flushing: Promise<void> | undefined;

  constructor(
    private readonly channel: Channel,
    private readonly replica: Replica,
    private readonly config: ServiceConfig,
    private readonly clock: Clock,
    /** This process's counters: fetches answered here (the store's process counts those it decides). */
    private readonly metrics?: ProcessMetrics,
  ) {}

  fetchBody(rawCode: string, encoding: FetchedEncoding, client?: FetchClient): string | Promise<string> {
    const code = this.parsed.parse(rawCode);
    checkServed(this.config, code.primary);
    const canonical = code.canonical;
    const v = this.version;
    if (this.replica.live(canonical, v, this.clock.now())) {
      if (this.metrics) this.metrics.fetches.found.n++;
      const n = (this.unsent.get(canonical) ?? 0) + 1;
      this.unsent.set(canonical, n);
      this.flushTimer ??= setTimeout(() => void this.flushCounts(), COUNT_FLUSH_MS);
      const count =
        Math.max(v[PEEK_FETCH_COUNT]!, this.bases.get(canonical) ?? 0) + (this.sending.get(canonical) ?? 0) + n;
      return this.cache.body(canonical, v, count, encoding, () => this.replica.facts(code));
    }
    const call: ForwardedFetchCall = { code: rawCode };
    if (client) call.client = { key: client.key, taken: client.limiter.takeConsumedOf(client.key) };
    return this.channel.call<ForwardedFetch>('fetch', call).then((r) => {
      this.setBase(canonical, r.count);
      return this.cache.body(canonical, r.version, r.count, encoding, () => r.facts);
    });
  }

  /** Sends the counts of the fetches answered here; resolves once the store's process has them. */
  flushCounts(): Promise<void> {
    if (this.flushTimer) clearTimeout(this.flushTimer);
    this.flushTimer = undefined;
    this.flushing ??= (async () => {
      try {
        while (this.unsent.size > 0) {
          this.sending = this.unsent;
          this.unsent = new Map();
          const now: Array<[string, number | null]> = await this.channel.call('counts', [...this.sending]);
          this.sending = new Map();
          for (const [code, total] of now) {
            if (total === null) this.bases.delete(code);
            else this.setBase(code, total);
          }
        }
      } catch {
        this.sending = new Map();
        // The store's process is gone: this process is ending too (fetch-process.ts); nothing to keep.
      } finally {
        this.flushing = undefined;
      }
    })();
    return this.flushing;
  }

  private setBase(canonical: string, count: number): void {
    if (this.bases.size >= BASES_KEPT && !this.bases.has(canonical)) this.bases.clear();
    this.bases.set(canonical, count);
  }

  publish(publicKey: Uint8Array, email: string, clientKey: string): Promise<CreatedResponse> {
    return this.channel.call('publish', { publicKey, email, clientKey });
  }

  verificationInfo(token: string): Promise<VerificationView | undefined> {
    return this.channel.call('verificationInfo', token);
  }

  confirm(token: string): Promise<VerificationView | undefined> {
    return this.channel.call('confirm', token);
  }

  topology(): TopologyResponse {
    return topologyOf(this.config);
  }

  statusReport(): Promise<StatusReport> {
    return this.channel.call('statusReport', null);
  }

  replicate(headers: IncomingHttpHeaders, body: Uint8Array, nowMs: number): Promise<ReplicateAck> {
    return this.channel.call('replicate', { headers, body, nowMs });
  }

  /** Rendered by the store's process, which asks this process (and every other) for its counts first. */
  metricsText(): Promise<string> {
    return this.channel.call('metricsText', null);
  }

  unpublish(req: UnpublishRequest, clientKey: string): Promise<UnpublishedResponse> {
    return this.channel.call('unpublish', { req, clientKey });
  }

  requestManageLink(email: string, clientKey: string): Promise<void> {
    return this.channel.call('requestManageLink', { email, clientKey });
  }

  manageView(token: string): Promise<ManageView | undefined> {
    return this.channel.call('manageView', token);
  }

  manageDelete(token: string, code: string | undefined, clientKey: string): Promise<ManageView | undefined> {
    return this.channel.call('manageDelete', { token, code, clientKey });
  }
}
