/**
 * Signing of replication requests: HMAC-SHA256, keyed by the shared
 * replication token, over
 *
 *   "stash-replicate-v1\n" <timestamp ms, decimal> "\n" <cluster id> "\n" <body>
 *
 * The timestamp and the cluster id travel in headers and are covered by the
 * MAC, so neither can be changed without the token; the receiver compares
 * MACs with crypto.timingSafeEqual so the check leaks no prefix length.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';

export const SIGNATURE_HEADER = 'x-stash-signature';
export const TIMESTAMP_HEADER = 'x-stash-timestamp';
export const CLUSTER_HEADER = 'x-stash-cluster-id';
const PREFIX = 'hmac-sha256=';
const DOMAIN = 'stash-replicate-v1\n';
/** The signed GET /v1/status (http/status-access.ts): another domain, so neither signature passes for the other. */
export const STATUS_DOMAIN = 'stash-status-v1\n';

/** The raw 32-byte MAC of one request. */
export function computeMac(
  token: string,
  timestamp: string,
  clusterId: string,
  body: Uint8Array,
  domain = DOMAIN,
): Buffer {
  return createHmac('sha256', token).update(domain).update(`${timestamp}\n${clusterId}\n`).update(body).digest();
}

/** The three headers a signed replication request carries. */
export function signatureHeaders(
  token: string,
  clusterId: string,
  body: Uint8Array,
  nowMs: number,
  domain = DOMAIN,
): Record<string, string> {
  const timestamp = String(nowMs);
  return {
    [TIMESTAMP_HEADER]: timestamp,
    [CLUSTER_HEADER]: clusterId,
    [SIGNATURE_HEADER]: `${PREFIX}${computeMac(token, timestamp, clusterId, body, domain).toString('hex')}`,
  };
}

/**
 * True when `header` is a well-formed signature of (timestamp, clusterId,
 * body) under `token`. Constant time in the MAC comparison.
 */
export function verifyMac(
  token: string,
  header: string | undefined,
  timestamp: string,
  clusterId: string,
  body: Uint8Array,
  domain = DOMAIN,
): boolean {
  if (header === undefined || !header.startsWith(PREFIX)) return false;
  const hex = header.slice(PREFIX.length);
  if (!/^[0-9a-f]{64}$/.test(hex)) return false;
  const expected = computeMac(token, timestamp, clusterId, body, domain);
  return timingSafeEqual(Buffer.from(hex, 'hex'), expected);
}

/** The headers that give a GET /v1/status the full answer from any address (monitoring from another host). */
export function statusSignatureHeaders(token: string, clusterId: string, nowMs: number): Record<string, string> {
  return signatureHeaders(token, clusterId, new Uint8Array(0), nowMs, STATUS_DOMAIN);
}
