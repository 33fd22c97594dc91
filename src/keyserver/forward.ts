/**
 * Forwarding: every server of a ring answers a fetch, an unpublish or a
 * create, including one for shares it does not serve. A server that is not
 * the route primary (or a promoted standby) of a share's owner passes the
 * request on to the owner's servers in route order (primary, then
 * failovers), over plain HTTP(S) to their POST /v1/share, and answers its
 * client with what the first of them answers about the share. Only a server
 * with no route to the owner at all still answers 421.
 *
 * - Loops: a forwarded request carries X-Stash-Forwarded-By and is never
 *   forwarded again; the server it reaches answers it itself (or 421).
 * - Trust: with a replication token, the request is signed as replication
 *   and status requests are (HMAC-SHA256, its own domain
 *   "stash-forward-v1"), over the forwarding server's id, the client's
 *   address and the body. A signed request is exempt from the per-address
 *   request limit at the owner's server (this server charged the client),
 *   and the owner's server counts mails and unpublishes against the client's
 *   address, not this server's. Without a token the request goes unsigned and
 *   counts as one from this server's address.
 * - Counts: the owner's server counts the fetch, once; this server counts
 *   nothing but the request tokens of its client (a miss's 5 included).
 * - Time: each attempt and the whole request have a deadline
 *   (ATTEMPT_MS, TOTAL_MS), below the 8 s a routed client gives a server.
 * - What moves on to the next server is what moves a routed client on
 *   (routed-fetch.ts, isServerFailure), and a signature the other server
 *   refuses (another token, a clock off by more than 5 minutes). An answer
 *   about the share (not found, pending, expired, a signature of the
 *   publisher that does not hold) is final and goes back to the client as
 *   it is.
 */
import type { IncomingHttpHeaders } from 'node:http';
import { errorCode, errorMessage } from '../errors.js';
import { exchange } from './client.js';
import { KeyServerError } from './errors.js';
import type { Logger } from './logger.js';
import { MAX_CLOCK_SKEW_MS } from './replication/inbound.js';
import {
  CLUSTER_HEADER,
  SIGNATURE_HEADER,
  TIMESTAMP_HEADER,
  signatureHeaders,
  verifyMac,
} from './replication/signature.js';
import { isServerFailure } from './routed-fetch.js';
import { keyServerBase } from '../config/server-url.js';
import { ownerServers, servesOwner } from './owner-routing.js';
import type { ServiceConfig } from './server-config.js';
import type { ShareRequest, ShareResponse } from './wire/messages.js';

export const FORWARDED_BY_HEADER = 'x-stash-forwarded-by';
export const FORWARDED_FOR_HEADER = 'x-stash-forwarded-for';
const DOMAIN = 'stash-forward-v1\n';

/** Per attempt and in all, by operation: a create waits for the owner's mail command (up to 15 s there). */
export const ATTEMPT_MS: Record<ShareRequest['op'], number> = { fetch: 3000, unpublish: 3000, create: 10_000 };
export const TOTAL_MS: Record<ShareRequest['op'], number> = { fetch: 6000, unpublish: 6000, create: 12_000 };

/** Codes of a server that refused the signature itself: another server of the route may still take it. */
const SIGNATURE_REFUSED = new Set(['REPLICATION_UNAUTHORIZED', 'REPLICATION_STALE']);

/** A client address as http/client-address.ts writes it (IPv4, an IPv6 /64 key, or 'unknown'). */
const CLIENT_KEY = /^[0-9a-zA-Z:./]{1,64}$/;

export interface Target {
  id: number;
  url: string;
}

/** What the receiving server makes of a forwarded request (forwardedFrom). */
export interface Forwarded {
  /** True when the signature held: the client's address below is the forwarding server's word. */
  signed: boolean;
  /** The original client's address key (signed requests only). */
  clientKey?: string;
}

function payload(forwardedBy: string, clientKey: string, body: Uint8Array): Buffer {
  return Buffer.concat([Buffer.from(`${forwardedBy}\n${clientKey}\n`, 'latin1'), body]);
}

/** Base-32-hex value of the first character of a code that is not a separator: its owner, cheaply (no check symbol). */
function ownerHint(rawCode: string): number | undefined {
  for (let i = 0; i < rawCode.length; i++) {
    const c = rawCode.charCodeAt(i);
    if (c === 0x20 || c === 0x2d) continue; // space, hyphen
    if (c >= 0x30 && c <= 0x39) return c - 0x30;
    const upper = c & ~0x20;
    if (upper >= 0x41 && upper <= 0x56) return upper - 0x41 + 10; // A-V
    return undefined;
  }
  return undefined;
}

export class Forwarder {
  /** The last failure logged per target URL, so an outage is logged once, and its end. */
  private readonly failing = new Map<string, string>();

  /** `config` is the live configuration object (a reload changes routes in it). */
  constructor(
    private readonly config: ServiceConfig,
    private readonly logger: Logger,
  ) {}

  /**
   * The servers a request about `owner`'s shares goes to, in route order;
   * empty when this server answers it itself: it serves the owner, or knows
   * no other server for it (then 421).
   */
  targets(owner: number): Target[] {
    const c = this.config;
    if (servesOwner(c, owner)) return [];
    const out: Target[] = [];
    for (const s of ownerServers(c, owner)) {
      const url = keyServerBase(s.url);
      if (s.id !== c.serverId && !out.some((t) => t.url === url)) out.push({ id: s.id, url });
    }
    return out;
  }

  /** For the fetch fast path: whether a fetch of `rawCode` is forwarded (a typo is not: the app refuses it). */
  forwardsFetch(rawCode: string): boolean {
    const owner = ownerHint(rawCode);
    return owner !== undefined && !servesOwner(this.config, owner) && this.targets(owner).length > 0;
  }

  /**
   * Sends `req` to `targets` in order; resolves with the first answer, throws
   * the first answer about the share, or OWNER_UNREACHABLE (502) naming every
   * server tried when none could answer.
   */
  async forward(req: ShareRequest, targets: readonly Target[], clientKey: string): Promise<ShareResponse> {
    const c = this.config;
    const by = String(c.serverId);
    const token = c.replicationToken;
    const signBody =
      token === undefined
        ? undefined
        : (body: Buffer) => ({
            ...signatureHeaders(token, c.clusterId, payload(by, clientKey, body), Date.now(), DOMAIN),
            [FORWARDED_FOR_HEADER]: clientKey,
          });
    const deadline = Date.now() + TOTAL_MS[req.op];
    const tried: string[] = [];
    for (const t of targets) {
      const left = deadline - Date.now();
      if (left <= 0) {
        tried.push(`server ${t.id} (${t.url}): not tried, out of time`);
        continue;
      }
      try {
        const res = await exchange(t.url, req, {
          timeoutMs: Math.min(ATTEMPT_MS[req.op], left),
          headers: { [FORWARDED_BY_HEADER]: by },
          ...(signBody ? { signBody } : {}),
        });
        this.recovered(t);
        return res;
      } catch (err) {
        if (!isServerFailure(err) && !SIGNATURE_REFUSED.has(errorCode(err) ?? '')) throw err;
        this.failed(t, err);
        tried.push(`server ${t.id} (${t.url}): ${errorMessage(err)}`);
      }
    }
    throw new KeyServerError(
      'OWNER_UNREACHABLE',
      `server ${c.serverId} passed this request on, but no server of the share's owner answered it: ${tried.join('; ')}`,
    );
  }

  private failed(t: Target, err: unknown): void {
    const why = errorCode(err) ?? 'error';
    if (this.failing.get(t.url) === why) return;
    this.failing.set(t.url, why);
    this.logger.warn(
      `forward: server ${t.id} (${t.url}) did not take a forwarded request: ${errorMessage(err)}; trying the next server of the route`,
    );
  }

  private recovered(t: Target): void {
    if (!this.failing.delete(t.url)) return;
    this.logger.info(`forward: server ${t.id} (${t.url}) takes forwarded requests again`);
  }
}

/**
 * Whether a request was forwarded by another server, and with what word on
 * its client: undefined for a request from a client; `signed: false` for an
 * unsigned one (treated as from the forwarding server's address); a
 * signature that does not hold is refused (401), as a replication one is.
 */
export function forwardedFrom(
  headers: IncomingHttpHeaders,
  body: Uint8Array,
  config: Pick<ServiceConfig, 'replicationToken' | 'clusterId'>,
  nowMs: number,
): Forwarded | undefined {
  const one = (v: string | string[] | undefined) => (Array.isArray(v) ? undefined : v);
  const by = one(headers[FORWARDED_BY_HEADER]);
  if (by === undefined) return undefined;
  const signature = one(headers[SIGNATURE_HEADER]);
  if (signature === undefined) return { signed: false };
  const token = config.replicationToken;
  const unauthorized = (why: string) =>
    new KeyServerError('REPLICATION_UNAUTHORIZED', `ReplicationUnauthorized: a forwarded request ${why}`);
  if (token === undefined) throw unauthorized('is signed, but this server has no replication token to check it with');
  const timestamp = one(headers[TIMESTAMP_HEADER]) ?? '';
  const clusterId = one(headers[CLUSTER_HEADER]) ?? '';
  const clientKey = one(headers[FORWARDED_FOR_HEADER]) ?? '';
  if (
    !/^[0-9]{1,16}$/.test(timestamp) ||
    clusterId !== config.clusterId ||
    !CLIENT_KEY.test(clientKey) ||
    !/^[0-9]{1,3}$/.test(by) ||
    !verifyMac(token, signature, timestamp, clusterId, payload(by, clientKey, body), DOMAIN)
  ) {
    throw unauthorized("does not verify with this server's replication token and cluster id");
  }
  if (Math.abs(nowMs - Number(timestamp)) > MAX_CLOCK_SKEW_MS) {
    throw new KeyServerError(
      'REPLICATION_STALE',
      `ReplicationUnauthorized: a forwarded request's timestamp is more than ${MAX_CLOCK_SKEW_MS / 60_000} minutes away from this server's clock`,
    );
  }
  return { signed: true, clientKey };
}

/** True when the request says another server forwarded it (checked by forwardedFrom once the body is read). */
export function claimsForwarded(headers: IncomingHttpHeaders): boolean {
  return headers[FORWARDED_BY_HEADER] !== undefined;
}

/** True when a forwarded request carries a signature (it is let past the request limit until the body is checked). */
export function claimsSignedForward(headers: IncomingHttpHeaders): boolean {
  return claimsForwarded(headers) && headers[SIGNATURE_HEADER] !== undefined;
}
