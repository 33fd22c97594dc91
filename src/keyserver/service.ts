/**
 * What the key server does, without HTTP: publish, fetch, the verification
 * page and its confirmation, topology and status. Routes translate requests
 * into these calls; errors are StashErrors whose codes the one error
 * middleware maps to statuses.
 */
import sodium from 'sodium-native';
import { securePool } from '../native/secure-pool.js';
import type { ServiceConfig } from './server-config.js';
import type { Clock } from './clock.js';
import { KeyServerError, RateLimitedError } from './errors.js';
import type { WindowLimiter } from './limits/window-limiter.js';
import type { Logger } from './logger.js';
import type { Mailer } from './mailer.js';
import type { ProcessMetrics } from './metrics/process-metrics.js';
import { ParsedCodes, generateShareCode, type ShareCode } from './share-code.js';
import type { ShareStore } from './store/share-store.js';
import { PEEK_FETCH_COUNT, PEEK_SIZE } from './store/share-table.js';
import { FetchedCache, factsOf, type FetchedEncoding, type FetchedFacts } from './wire/fetched-cache.js';
import type { PeerStatus, Replicator } from './replication/outbound.js';
import { mailboxKey, maskEmail, validateEmail, validatePublicKey } from './validate.js';
import { Withdrawals } from './withdraw.js';
import { checkServed, ringSuccessor, topologyOf } from './owner-routing.js';
import { fetchRefused, publishedFingerprint } from './published-share.js';
import type { CreatedResponse, FetchedResponse, StatusResponse, TopologyResponse } from './wire/messages.js';

export interface ServiceDeps {
  store: ShareStore;
  clock: Clock;
  mailer: Mailer;
  config: ServiceConfig;
  logger: Logger;
  emailLimiter: WindowLimiter;
  emailIpLimiter: WindowLimiter;
  replicator?: Replicator;
  /** The store's process's counters: publishes, confirmations, mails, fetches decided here. */
  metrics?: ProcessMetrics;
}

/** What a verification page shows about its share; the fingerprint lets the owner check the key is theirs. */
export interface VerificationView {
  state: 'pending' | 'confirmed-now' | 'confirmed';
  maskedEmail: string;
  expiresAt: number;
  verifiedAt: number;
  /** "XXXX-XXXX-XXXX-XXXX-XXXX-XXXX", as `stash vault identity show` prints it. */
  fingerprint: string;
}

function view(
  state: VerificationView['state'],
  share: { email: string; expiresAt: number; verifiedAt: number; publicKey: Uint8Array },
): VerificationView {
  return {
    state,
    maskedEmail: maskEmail(share.email),
    expiresAt: share.expiresAt,
    verifiedAt: share.verifiedAt,
    fingerprint: publishedFingerprint(share.publicKey),
  };
}

const TOKEN_BYTES = 32;
const TOKEN_PATTERN = /^[A-Za-z0-9_-]{43}$/;

/** SHA-256 of a verification token (libsodium's: 1.6 us against 2.8 for createHash, 2026-11-27). */
function hashToken(token: Uint8Array): Buffer {
  const out = Buffer.alloc(sodium.crypto_hash_sha256_BYTES);
  sodium.crypto_hash_sha256(out, token);
  return out;
}

function minutes(seconds: number): string {
  return seconds >= 120 ? `${Math.ceil(seconds / 60)} minutes` : `${seconds} seconds`;
}

export class ShareService {
  private readonly startedAt: number;
  private readonly fetched = new FetchedCache();
  /** ShareStore.peek's numbers of the fetch in progress (fetches are synchronous: one array serves all). */
  private readonly version = new Float64Array(PEEK_SIZE);
  private readonly parsed = new ParsedCodes();
  /** When the configuration in use was read (start, then each reload), and why the last reload failed. */
  readonly configState: { loadedAt: number; reloadError: string | undefined };
  /** Unpublish and manage links: deleting shares before their expiry. */
  readonly withdrawals: Withdrawals;

  constructor(private readonly deps: ServiceDeps) {
    this.startedAt = deps.clock.now();
    this.configState = { loadedAt: this.startedAt, reloadError: undefined };
    this.withdrawals = new Withdrawals(deps);
  }

  /** Validates, checks the mail limits, stores the pending share durably, sends the link. */
  async publish(publicKey: Uint8Array, rawEmail: string, clientKey: string): Promise<CreatedResponse> {
    const { config, store, clock } = this.deps;
    const key = validatePublicKey(publicKey);
    const email = validateEmail(rawEmail);
    // Counted per mailbox: sub-addresses (victim+1@, victim+2@, ...) share one limit.
    const emailKey = mailboxKey(email);
    const perAddress = this.deps.emailLimiter.check(emailKey);
    if (!perAddress.ok) {
      this.deps.metrics?.mailRefused('emails-per-address');
      throw new RateLimitedError(
        `too many verification emails for this address (limit: ${config.verificationEmailRateLimitPerHour} per hour); try again in ${minutes(perAddress.retryAfter)}`,
        perAddress.retryAfter,
        'emails-per-address',
      );
    }
    const perIp = this.deps.emailIpLimiter.check(clientKey);
    if (!perIp.ok) {
      this.deps.metrics?.mailRefused('emails-per-ip');
      throw new RateLimitedError(
        `too many verification emails from your address (limit: ${config.verificationEmailIpRateLimitPerHour} per hour per source IP); try again in ${minutes(perIp.retryAfter)}`,
        perIp.retryAfter,
        'emails-per-ip',
      );
    }
    // Counted before any await: concurrent publishes cannot slip past the limits.
    this.deps.emailLimiter.record(emailKey);
    this.deps.emailIpLimiter.record(clientKey);

    const now = clock.now();
    const expiresAt = now + config.shareTtlSeconds * 1000;
    const secondary = ringSuccessor(config);
    let code = generateShareCode(config.serverId, secondary);
    for (let i = 0; store.has(code.canonical); i++) {
      if (i > 8) throw new KeyServerError('INTERNAL', 'could not find a free share code');
      code = generateShareCode(config.serverId, secondary);
    }
    // The token lives in locked memory until it has been hashed and turned into
    // the link; the link string itself cannot be wiped (it is an argv entry).
    // Pool memory, given back below: a sodium_malloc per publish would pile up
    // guarded mappings until the collector freed them (native/secure-pool.ts).
    const tokenBytes = securePool.take(TOKEN_BYTES);
    let token: string;
    let tokenHash: Buffer;
    try {
      sodium.randombytes_buf(tokenBytes);
      tokenHash = hashToken(tokenBytes);
      const copy = Buffer.from(tokenBytes);
      token = copy.toString('base64url');
      copy.fill(0);
    } finally {
      securePool.release(tokenBytes);
    }
    await store.put({ code: code.canonical, publicKey: key, email, createdAt: now, expiresAt, tokenHash });
    const metrics = this.deps.metrics;
    if (metrics) metrics.publishes.n++;
    const mail = await this.deps.mailer.send(email, `${config.publicUrl}/verify/${token}`, token);
    metrics?.mail(mail.verification);
    this.deps.logger.info(
      `publish: share ${code.canonical.slice(0, 2)}… for ${maskEmail(email)}, verification ${mail.verification}`,
    );
    return { type: 'created', code: code.display, expiresAt, verification: mail.verification, message: mail.message };
  }

  /** Fetches a verified share and counts the fetch. */
  fetch(rawCode: string): FetchedResponse {
    const code = this.parsed.parse(rawCode);
    this.checkServed(code.primary);
    const found = this.deps.store.lookup(code.canonical);
    if (found.state !== 'live') throw this.refused(found.state);
    this.counted('found');
    const s = found.share;
    const fetchCount = this.deps.store.recordFetch(s);
    return {
      type: 'fetched',
      code: code.display,
      publicKey: s.publicKey,
      email: s.email,
      verifiedAt: s.verifiedAt,
      fetchCount,
      expiresAt: s.expiresAt,
    };
  }

  /**
   * fetch(), answered as the body of the answer in `encoding` (one character
   * per byte): the path of every fetch over HTTP. No copy of the share is
   * made unless the answer cache lacks its version (wire/fetched-cache.ts).
   */
  fetchBody(rawCode: string, encoding: FetchedEncoding): string {
    const code = this.parsed.parse(rawCode);
    this.checkServed(code.primary);
    const v = this.version;
    const state = this.deps.store.peek(code.canonical, v);
    if (state !== 'live') throw this.refused(state);
    this.counted('found');
    const count = this.deps.store.countFetches(code.canonical, v[PEEK_FETCH_COUNT]!, 1);
    return this.fetched.body(code.canonical, v, count, encoding, () => this.factsOf(code));
  }

  /**
   * Counts `n` fetches of `rawCode` answered elsewhere (a fetch process of
   * this server, multi/remote-backend.ts) and returns the count now; undefined
   * when the share is no longer live here (the fetches are then not counted).
   */
  countForwarded(rawCode: string, n: number): number | undefined {
    const code = this.parsed.parse(rawCode);
    const v = this.version;
    if (this.deps.store.peek(code.canonical, v) !== 'live') return undefined;
    return this.deps.store.countFetches(code.canonical, v[PEEK_FETCH_COUNT]!, n);
  }

  /** What a fetched answer of a live share says besides its count. */
  factsOf(code: ShareCode): FetchedFacts {
    const found = this.deps.store.lookup(code.canonical);
    if (found.state !== 'live') throw fetchRefused(found.state);
    return factsOf(code.display, found.share);
  }

  private checkServed(owner: number): void {
    checkServed(this.deps.config, owner);
  }

  private counted(result: 'found' | 'missing' | 'expired' | 'pending'): void {
    const m = this.deps.metrics;
    if (m) m.fetches[result].n++;
  }

  /** A fetch that finds no live share: counted by what it found, then fetchRefused. */
  private refused(state: 'missing' | 'expired' | 'pending'): KeyServerError {
    this.counted(state);
    return fetchRefused(state);
  }

  /**
   * A fetch a fetch process could not answer from its own cache
   * (multi/remote-backend.ts): counted here, answered with what the process
   * needs to answer the next ones itself (the share's facts, its version,
   * the count now).
   */
  fetchForProcess(rawCode: string): { facts: FetchedFacts; version: Float64Array; count: number } {
    const code = this.parsed.parse(rawCode);
    this.checkServed(code.primary);
    const version = new Float64Array(PEEK_SIZE);
    const state = this.deps.store.peek(code.canonical, version);
    if (state !== 'live') throw this.refused(state);
    this.counted('found');
    const count = this.deps.store.countFetches(code.canonical, version[PEEK_FETCH_COUNT]!, 1);
    return { facts: this.factsOf(code), version, count };
  }

  private tokenHash(token: string): Buffer | undefined {
    if (!TOKEN_PATTERN.test(token)) return undefined;
    const bytes = Buffer.from(token, 'base64url');
    if (bytes.length !== TOKEN_BYTES) return undefined;
    const hash = hashToken(bytes);
    bytes.fill(0);
    return hash;
  }

  /**
   * What the page of a verification link shows: a pending share (the page
   * with the button), one this link already confirmed (a link opened again),
   * or undefined for a link that is unknown or expired.
   */
  verificationInfo(token: string): VerificationView | undefined {
    const hash = this.tokenHash(token);
    if (!hash) return undefined;
    const pending = this.deps.store.findByToken(hash);
    if (pending) return view('pending', pending);
    const confirmed = this.deps.store.findConfirmedByToken(hash);
    return confirmed ? view('confirmed', confirmed) : undefined;
  }

  /**
   * Confirms ownership of the address; single use: a second confirmation of
   * the same link changes nothing and answers "already confirmed".
   */
  async confirm(token: string): Promise<VerificationView | undefined> {
    const hash = this.tokenHash(token);
    if (!hash) return undefined;
    const share = await this.deps.store.verify(hash);
    if (!share) {
      const confirmed = this.deps.store.findConfirmedByToken(hash);
      return confirmed ? view('confirmed', confirmed) : undefined;
    }
    if (this.deps.metrics) this.deps.metrics.confirmations.n++;
    this.deps.logger.info(`verify: share ${share.code.slice(0, 2)}… confirmed by ${maskEmail(share.email)}`);
    return view('confirmed-now', share);
  }

  topology(): TopologyResponse {
    return topologyOf(this.deps.config);
  }

  /** Per-peer replication progress (JSON status only). */
  peerStatus(): PeerStatus[] {
    return this.deps.replicator?.peers() ?? [];
  }

  /** JSON-only status details: what the store's start-up check skipped (the counts are in status()), the last failed reload. */
  statusDetails(): {
    store_skipped: Array<{ from: number; to: number; reason: string }>;
    store_damaged_copy: string | null;
    config_reload_error: string | null;
  } {
    const r = this.deps.store.recovery;
    return {
      store_skipped: r.skipped.map((x) => ({ from: x.from, to: x.to, reason: x.reason })),
      store_damaged_copy: r.damagedCopy ?? null,
      config_reload_error: this.configState.reloadError ?? null,
    };
  }

  status(): StatusResponse {
    const s = this.deps.store.stats();
    const skipped = this.deps.store.recovery.skipped;
    return {
      replication_pending: this.deps.replicator?.pending() ?? 0,
      replication_last_sequence: s.lastSequence,
      shares_live: s.sharesLive,
      shares_pending: s.sharesPending,
      store_bytes: s.storeBytes,
      uptime_seconds: Math.floor((this.deps.clock.now() - this.startedAt) / 1000),
      server_id: this.deps.config.serverId,
      origin_epoch: this.deps.config.originEpoch,
      store_skipped_ranges: skipped.length,
      store_skipped_bytes: skipped.reduce((n, r) => n + r.to - r.from, 0),
      config_loaded_at: this.configState.loadedAt,
    };
  }
}
