/**
 * The backend of a fetch process (docs/benchmarks.md, "Multi-core fetch"):
 * fetches of the shares it has seen are answered here, everything else is
 * asked of the store's process, which holds the one store.
 *
 * - A fetch of a share not held here is a call to the store's process, which
 *   counts it and answers with the share's facts, version and count; the
 *   process keeps them (bounded) and answers the next fetches of that share
 *   itself. Only live shares are held: a code that is pending, unknown or
 *   expired is asked every time, so a share confirmed through either process
 *   is fetchable through this one at once.
 * - Fetches answered here are counted here and sent to the store's process
 *   every COUNT_FLUSH_MS; its answer (the count now, fetches through every
 *   process) becomes the base of the counts shown here. A count shown may
 *   lag the other processes' fetches by that long; the stored count is the
 *   sum of all of them.
 * - The store's process names every share that changed (a new version, a
 *   tombstone) and this process forgets it; a held share past its expiry is
 *   asked again.
 * - Publish, confirm, the verification page, status and replication are
 *   calls, answered by the store's process's service exactly as there.
 */
import type { IncomingHttpHeaders } from 'node:http';
import type { KeyServerBackend, StatusReport } from '../backend.js';
import type { Clock } from '../clock.js';
import type { ReplicateAck } from '../replication/batch.js';
import { checkServed, topologyOf, type ServiceConfig, type VerificationView } from '../service.js';
import { parseShareCode, type ShareCode } from '../share-code.js';
import { PEEK_EXPIRES_AT } from '../store/share-table.js';
import { FetchedCache, type FetchedEncoding, type FetchedFacts } from '../wire/fetched-cache.js';
import type { CreatedResponse, TopologyResponse } from '../wire/messages.js';
import type { Channel } from './channel.js';

/** How often fetch counts go to the store's process (the store itself writes them every FETCH_FLUSH_MS). */
export const COUNT_FLUSH_MS = 100;
/** Shares held at most (about 400 bytes each); when full, the holding starts again empty. */
const HELD_MAX = 16_384;
const PARSED_KEPT = 4096;

/** What the store's process answers to a fetch it counted for this process. */
export interface ForwardedFetch {
  facts: FetchedFacts;
  version: Float64Array;
  count: number;
}

interface Held {
  facts: FetchedFacts;
  version: Float64Array;
  /** The count the store's process last said, with every fetch through this process sent before it. */
  base: number;
}

export class RemoteBackend implements KeyServerBackend {
  private readonly held = new Map<string, Held>();
  /** Fetches answered here and not yet sent, by canonical code. */
  private unsent = new Map<string, number>();
  /** Those sent and not yet answered. */
  private sending = new Map<string, number>();
  private readonly cache = new FetchedCache();
  private readonly parsed = new Map<string, ShareCode>();
  private flushTimer: NodeJS.Timeout | undefined;
  private flushing: Promise<void> | undefined;

  constructor(private readonly channel: Channel, private readonly config: ServiceConfig, private readonly clock: Clock) {}

  fetchBody(rawCode: string, encoding: FetchedEncoding): string | Promise<string> {
    const code = this.parse(rawCode);
    checkServed(this.config, code.primary);
    const canonical = code.canonical;
    const h = this.held.get(canonical);
    if (h !== undefined && h.version[PEEK_EXPIRES_AT]! > this.clock.now()) {
      const n = (this.unsent.get(canonical) ?? 0) + 1;
      this.unsent.set(canonical, n);
      this.flushTimer ??= setTimeout(() => void this.flushCounts(), COUNT_FLUSH_MS);
      return this.cache.body(canonical, h.version, h.base + (this.sending.get(canonical) ?? 0) + n, encoding, () => h.facts);
    }
    this.held.delete(canonical);
    return this.channel.call<ForwardedFetch>('fetch', rawCode).then((r) => {
      if (this.held.size >= HELD_MAX) this.held.clear();
      // r.count holds none of the fetches answered here and not yet sent: the next ones show them on top.
      this.held.set(canonical, { facts: r.facts, version: r.version, base: r.count });
      return this.cache.body(canonical, r.version, r.count, encoding, () => r.facts);
    });
  }

  /** The store's process says these shares changed: forget them. */
  forget(codes: string[]): void {
    for (const c of codes) this.held.delete(c);
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
            const h = this.held.get(code);
            if (h === undefined) continue;
            if (total === null) this.held.delete(code);
            else h.base = total;
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

  private parse(rawCode: string): ShareCode {
    let code = this.parsed.get(rawCode);
    if (code === undefined) {
      code = parseShareCode(rawCode);
      if (this.parsed.size >= PARSED_KEPT) this.parsed.clear();
      this.parsed.set(rawCode, code);
    }
    return code;
  }
}
