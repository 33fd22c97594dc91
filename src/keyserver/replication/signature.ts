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

/** The raw 32-byte MAC of one request. */
export function computeMac(token: string, timestamp: string, clusterId: string, body: Uint8Array): Buffer {
  return createHmac('sha256', token).update(DOMAIN).update(`${timestamp}\n${clusterId}\n`).update(body).digest();
}

/** The three headers a signed replication request carries. */
export function signatureHeaders(token: string, clusterId: string, body: Uint8Array, nowMs: number): Record<string, string> {
  const timestamp = String(nowMs);
  return {
    [TIMESTAMP_HEADER]: timestamp,
    [CLUSTER_HEADER]: clusterId,
    [SIGNATURE_HEADER]: `${PREFIX}${computeMac(token, timestamp, clusterId, body).toString('hex')}`,
  };
}

/**
 * True when `header` is a well-formed signature of (timestamp, clusterId,
 * body) under `token`. Constant time in the MAC comparison.
 */
export function verifyMac(token: string, header: string | undefined, timestamp: string, clusterId: string, body: Uint8Array): boolean {
  if (header === undefined || !header.startsWith(PREFIX)) return false;
  const hex = header.slice(PREFIX.length);
  if (!/^[0-9a-f]{64}$/.test(hex)) return false;
  const expected = computeMac(token, timestamp, clusterId, body);
  return timingSafeEqual(Buffer.from(hex, 'hex'), expected);
}
