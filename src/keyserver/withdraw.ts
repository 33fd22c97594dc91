/**
 * Deleting a share before its TTL (issue 28, item 7), two ways:
 *
 * - Unpublish: the publisher signs the request with the Ed25519 key the
 *   share holds (wire/unpublish-signature.ts). The server checks the
 *   timestamp (within 5 minutes of its clock: a stale request is refused),
 *   then the signature against the share's own key, then writes a tombstone.
 *   A replayed request finds the share gone (410): the signature names the
 *   one code, so it can never delete anything else.
 * - Manage link (Hagrid's): whoever reads the address's mail can delete the
 *   shares published for it. POST /manage mails a link to the address when
 *   shares for it are here; GET /manage/<token> shows them (no side effect:
 *   mail scanners fetch links), POST deletes. Only the SHA-256 of the token
 *   is kept, in memory, for an hour: a restart forgets the links, and a new
 *   one is asked for.
 *
 * Either way the deletion is a store tombstone (reason "deleted"), durable
 * before the answer, replicated as the spec's `tombstone` event, and sent to
 * the fetch processes' copies, so no server of the ring serves the share
 * afterwards. Rate-limited as publishes are: an unpublish counts against the
 * per-source-IP publish limit's number (its own count), a manage mail against
 * the per-address and per-IP mail limits.
 */
import { createHash, randomBytes } from 'node:crypto';
import sodium from 'sodium-native';
import { KeyServerError, RateLimitedError } from './errors.js';
import { BoundedMap } from './limits/bounded-map.js';
import { WindowLimiter } from './limits/window-limiter.js';
import { checkServed } from './owner-routing.js';
import { fetchRefused, publishedFingerprint } from './published-share.js';
import type { ServiceDeps } from './service.js';
import { parseShareCode } from './share-code.js';
import { maskEmail, mailboxKey, validateEmail } from './validate.js';
import {
  UNPUBLISH_NONCE_BYTES,
  UNPUBLISH_SIGNATURE_BYTES,
  type UnpublishRequest,
  type UnpublishedResponse,
} from './wire/messages.js';
import { UNPUBLISH_WINDOW_MS, unpublishSignedBytes } from './wire/unpublish-signature.js';

/** How long a manage link works, and how many are remembered at most (least recently used out). */
export const MANAGE_LINK_TTL_MS = 3_600_000;
const MANAGE_LINKS_KEPT = 10_000;
const TOKEN_BYTES = 32;
const TOKEN_PATTERN = /^[A-Za-z0-9_-]{43}$/;

/** What a withdrawal needs of the service: the same store, clock, mailer, config and mail limits. */
export type WithdrawDeps = Pick<
  ServiceDeps,
  'store' | 'clock' | 'mailer' | 'config' | 'logger' | 'emailLimiter' | 'emailIpLimiter'
>;

/** One share as a manage page shows it. */
export interface ManagedShare {
  /** Display form: the address owner may hand it on or recognise it. */
  code: string;
  fingerprint: string;
  state: 'pending' | 'confirmed';
  expiresAt: number;
}

/** What a manage link shows: the masked address, its shares here, and what a POST just deleted. */
export interface ManageView {
  maskedEmail: string;
  linkExpiresAt: number;
  shares: ManagedShare[];
  deleted: string[];
}

function hashToken(bytes: Uint8Array): string {
  return createHash('sha256').update(bytes).digest('hex');
}

const minutes = (seconds: number) => (seconds >= 120 ? `${Math.ceil(seconds / 60)} minutes` : `${seconds} seconds`);

export class Withdrawals {
  /** Per source IP: unpublish requests and manage deletions in the last hour. */
  private readonly unpublishes: WindowLimiter;
  /** hex SHA-256 of a manage token -> the address (lower case) and when the link dies. */
  private readonly links = new BoundedMap<{ email: string; expiresAt: number }>(MANAGE_LINKS_KEPT);

  constructor(private readonly d: WithdrawDeps) {
    this.unpublishes = new WindowLimiter({ limit: d.config.verificationEmailIpRateLimitPerHour, clock: d.clock });
  }

  /** POST /v1/share unpublish on a server that serves the code's owner (the route forwards it here). */
  async unpublish(req: UnpublishRequest, clientKey: string): Promise<UnpublishedResponse> {
    const { store, clock, config } = this.d;
    const code = parseShareCode(req.code);
    checkServed(config, code.primary);
    this.countUnpublish(clientKey);
    const now = clock.now();
    if (Math.abs(now - req.timestamp) > UNPUBLISH_WINDOW_MS) {
      throw new KeyServerError(
        'UNPUBLISH_STALE',
        `the unpublish request was signed at ${new Date(req.timestamp).toISOString()}, more than ${UNPUBLISH_WINDOW_MS / 60_000} minutes from this server's clock; check the clock of the computer that sent it and try again`,
      );
    }
    if (req.nonce.length !== UNPUBLISH_NONCE_BYTES || req.signature.length !== UNPUBLISH_SIGNATURE_BYTES) {
      throw new KeyServerError(
        'MALFORMED_REQUEST',
        `an unpublish request carries a ${UNPUBLISH_NONCE_BYTES}-byte nonce and a ${UNPUBLISH_SIGNATURE_BYTES}-byte signature`,
      );
    }
    const found = store.lookup(code.canonical);
    if (found.state !== 'live' && found.state !== 'pending') throw fetchRefused(found.state);
    const signed = unpublishSignedBytes(code.canonical, req.timestamp, req.nonce);
    const ed25519 = found.share.publicKey.subarray(33, 65);
    if (!sodium.crypto_sign_verify_detached(Buffer.from(req.signature), signed, ed25519)) {
      throw new KeyServerError(
        'UNPUBLISH_FORBIDDEN',
        'the unpublish request is not signed by the identity whose key this share holds; only its publisher can unpublish it (or the owner of its address, through a manage link)',
      );
    }
    const deletedAt = await store.withdraw(code.canonical);
    if (deletedAt === undefined) throw fetchRefused('expired');
    this.d.logger.info(`unpublish: share ${code.canonical.slice(0, 2)}… deleted by its publisher`);
    return { type: 'unpublished', code: code.display, deletedAt };
  }

  /**
   * POST /manage: when shares for `rawEmail` are here, mails a manage link to
   * it. Resolves once that is decided, before the mail command has run: the
   * answer (the same either way) must not tell by its timing whether an
   * address has shares here.
   */
  async requestManageLink(rawEmail: string, clientKey: string): Promise<void> {
    const { config, clock, logger } = this.d;
    const email = validateEmail(rawEmail);
    const perAddress = this.d.emailLimiter.check(mailboxKey(email));
    if (!perAddress.ok) {
      throw new RateLimitedError(
        `too many emails for this address (limit: ${config.verificationEmailRateLimitPerHour} per hour); try again in ${minutes(perAddress.retryAfter)}`,
        perAddress.retryAfter,
        'emails-per-address',
      );
    }
    const perIp = this.d.emailIpLimiter.check(clientKey);
    if (!perIp.ok) {
      throw new RateLimitedError(
        `too many emails from your address (limit: ${config.verificationEmailIpRateLimitPerHour} per hour per source IP); try again in ${minutes(perIp.retryAfter)}`,
        perIp.retryAfter,
        'emails-per-ip',
      );
    }
    this.d.emailLimiter.record(mailboxKey(email));
    this.d.emailIpLimiter.record(clientKey);
    if (this.sharesOf(email.toLowerCase()).length === 0) return;
    const bytes = randomBytes(TOKEN_BYTES);
    const token = bytes.toString('base64url');
    this.links.set(hashToken(bytes), { email: email.toLowerCase(), expiresAt: clock.now() + MANAGE_LINK_TTL_MS });
    bytes.fill(0);
    void this.d.mailer.send(email, `${config.publicUrl}/manage/${token}`, token, 'manage').then((mail) => {
      logger.info(`manage: link for ${maskEmail(email)} ${mail.verification}`);
    });
  }

  /** GET /manage/<token>: the address's shares here, or undefined for an unknown or expired link. */
  manageView(token: string): ManageView | undefined {
    const link = this.link(token);
    if (!link) return undefined;
    return {
      maskedEmail: maskEmail(link.email),
      linkExpiresAt: link.expiresAt,
      shares: this.sharesOf(link.email),
      deleted: [],
    };
  }

  /**
   * POST /manage/<token>: deletes the share `rawCode` of the link's address,
   * or every one of them without a code; then what is left. Undefined for
   * an unknown or expired link.
   */
  async manageDelete(token: string, rawCode: string | undefined, clientKey: string): Promise<ManageView | undefined> {
    const link = this.link(token);
    if (!link) return undefined;
    const wanted = rawCode === undefined ? undefined : parseShareCode(rawCode).display;
    const targets = this.sharesOf(link.email).filter((s) => wanted === undefined || s.code === wanted);
    if (targets.length > 0) this.countUnpublish(clientKey);
    const deleted: string[] = [];
    for (const s of targets) {
      const canonical = parseShareCode(s.code).canonical;
      if ((await this.d.store.withdraw(canonical)) !== undefined) deleted.push(s.code);
    }
    if (deleted.length > 0)
      this.d.logger.info(
        `manage: ${deleted.length} share(s) of ${maskEmail(link.email)} deleted through a manage link`,
      );
    return {
      maskedEmail: maskEmail(link.email),
      linkExpiresAt: link.expiresAt,
      shares: this.sharesOf(link.email),
      deleted,
    };
  }

  private link(token: string): { email: string; expiresAt: number } | undefined {
    if (!TOKEN_PATTERN.test(token)) return undefined;
    const bytes = Buffer.from(token, 'base64url');
    if (bytes.length !== TOKEN_BYTES) return undefined;
    const key = hashToken(bytes);
    bytes.fill(0);
    const link = this.links.get(key);
    if (!link) return undefined;
    if (link.expiresAt <= this.d.clock.now()) {
      this.links.purge((l) => l.expiresAt <= this.d.clock.now());
      return undefined;
    }
    return link;
  }

  /** Unexpired shares (pending ones included) published for `email` (lower case), held here. */
  private sharesOf(email: string): ManagedShare[] {
    const now = this.d.clock.now();
    const out: ManagedShare[] = [];
    const snapshot = this.d.store.sharesSnapshot();
    try {
      for (const s of snapshot) {
        if (s.expiresAt <= now || s.email.toLowerCase() !== email) continue;
        out.push({
          code: parseShareCode(s.code).display,
          fingerprint: publishedFingerprint(s.publicKey),
          state: s.verifiedAt === 0 ? 'pending' : 'confirmed',
          expiresAt: s.expiresAt,
        });
      }
    } finally {
      snapshot.close();
    }
    return out.sort((a, b) => a.expiresAt - b.expiresAt);
  }

  private countUnpublish(clientKey: string): void {
    const limit = this.d.config.verificationEmailIpRateLimitPerHour;
    // The same number as publishes (a reload may change it), its own count.
    this.unpublishes.configure(limit);
    const decision = this.unpublishes.check(clientKey);
    if (!decision.ok) {
      throw new RateLimitedError(
        `too many unpublish requests from your address (limit: ${limit} per hour per source IP); try again in ${minutes(decision.retryAfter)}`,
        decision.retryAfter,
        'unpublishes-per-ip',
      );
    }
    this.unpublishes.record(clientKey);
  }
}
