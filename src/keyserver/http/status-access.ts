/**
 * Who sees what of GET /v1/status. Everyone gets replication_pending and
 * replication_last_sequence (the spec names them as the status of a server);
 * the rest (share counts, store size, uptime, what recovery skipped, the
 * per-peer replication state) only a caller on loopback, or one who signs
 * the request with the cluster's replication token. The exact live and
 * pending counts would otherwise tell anyone when shares come and go.
 *
 * "Loopback" is the client address as the rate limits see it: with
 * --trust-proxy, the last X-Forwarded-For entry (the one the proxy wrote),
 * so a proxy on the same host does not make every client local.
 *
 * The signature is the replication one (HMAC-SHA256 keyed by the token, with
 * X-Stash-Timestamp and X-Stash-Cluster-Id) over an empty body, in its own
 * domain "stash-status-v1", so a status signature is no replication
 * signature and the token never travels.
 */
import type { IncomingHttpHeaders } from 'node:http';
import { KeyServerError } from '../errors.js';
import { MAX_CLOCK_SKEW_MS } from '../replication/inbound.js';
import {
  CLUSTER_HEADER,
  SIGNATURE_HEADER,
  STATUS_DOMAIN,
  TIMESTAMP_HEADER,
  verifyMac,
} from '../replication/signature.js';
import type { StatusResponse } from '../wire/messages.js';
import type { ClientAddress } from './client-address.js';

const EMPTY = new Uint8Array(0);

/** True for 127.0.0.0/8 and ::1 (IPv4-mapped addresses are already folded to IPv4). */
export function isLoopback(ip: string): boolean {
  return /^127\.\d+\.\d+\.\d+$/.test(ip) || ip === '::1';
}

/**
 * Whether the caller gets the full status. A request that carries a
 * signature that does not hold is refused (401), not quietly served less:
 * a monitor with the wrong token should hear so.
 */
export function fullStatusAllowed(
  headers: IncomingHttpHeaders,
  client: ClientAddress,
  c: { replicationToken?: string | undefined; clusterId: string },
  nowMs: number,
): boolean {
  const signature = headers[SIGNATURE_HEADER];
  if (signature === undefined) return isLoopback(client.ip);
  const one = (v: string | string[] | undefined) => (Array.isArray(v) ? undefined : v);
  const timestamp = one(headers[TIMESTAMP_HEADER]) ?? '';
  const clusterId = one(headers[CLUSTER_HEADER]) ?? '';
  if (c.replicationToken === undefined)
    throw new KeyServerError(
      'REPLICATION_UNAUTHORIZED',
      'ReplicationUnauthorized: this server has no replication token to check a status signature with',
    );
  if (
    !/^[0-9]{1,16}$/.test(timestamp) ||
    clusterId !== c.clusterId ||
    !verifyMac(c.replicationToken, one(signature), timestamp, clusterId, EMPTY, STATUS_DOMAIN)
  ) {
    throw new KeyServerError(
      'REPLICATION_UNAUTHORIZED',
      "ReplicationUnauthorized: the status signature does not verify with this server's replication token and cluster id",
    );
  }
  if (Math.abs(nowMs - Number(timestamp)) > MAX_CLOCK_SKEW_MS) {
    throw new KeyServerError(
      'REPLICATION_STALE',
      `ReplicationUnauthorized: the status request's timestamp is more than ${MAX_CLOCK_SKEW_MS / 60_000} minutes away from this server's clock`,
    );
  }
  return true;
}

/** What everyone may see. */
export function publicStatus(
  s: StatusResponse,
): Pick<StatusResponse, 'replication_pending' | 'replication_last_sequence'> {
  return { replication_pending: s.replication_pending, replication_last_sequence: s.replication_last_sequence };
}
