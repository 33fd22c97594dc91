/**
 * Every metric family of GET /metrics, with its type and help text, in the
 * order the exposition lists them. Names follow Prometheus conventions
 * (`_total` counters, base units: `_seconds`, `_bytes`). Labels never carry
 * a share code, token, key or address: endpoints are path templates
 * (`/verify/{token}`), peers their /v1/replicate URL, processes `store` or
 * `fetch-N`. docs/operations.md, "Metrics", lists them for operators.
 */

export type MetricType = 'counter' | 'gauge';

export interface Family {
  name: string;
  type: MetricType;
  help: string;
}

const P = 'stash_keyserver_';

const f = (name: string, type: MetricType, help: string): Family => ({ name: `${P}${name}`, type, help });

export const FAMILIES: readonly Family[] = [
  // Counted in every process and summed by the store's process (gather.ts).
  f('http_requests_total', 'counter', 'HTTP requests answered, by endpoint (path template), method and status.'),
  f('publishes_total', 'counter', 'Shares published: stored durably and answered 201.'),
  f('confirmations_total', 'counter', 'Email addresses confirmed through their verification link.'),
  f(
    'fetches_total',
    'counter',
    'Share fetches looked up, by result: found (200), pending (409), missing (404), expired (410).',
  ),
  f('rate_limited_total', 'counter', 'Requests refused with 429, by the limit that refused them.'),
  f(
    'verification_mails_total',
    'counter',
    'Verification mails, by result: sent, printed (developer mode) or failed (the mail command failed or none is configured).',
  ),
  f(
    'verification_mails_refused_total',
    'counter',
    'Publishes refused before a mail was sent, by the mail limit that refused them.',
  ),
  // The store (the store's process).
  f('shares', 'gauge', 'Shares held in the store, by state (live: confirmed; pending: waiting for confirmation).'),
  f('store_bytes', 'gauge', 'Size of store.log.'),
  f('store_records', 'gauge', 'Records in store.log.'),
  f('store_compactions_total', 'counter', 'Compactions of store.log since start.'),
  f(
    'store_full_refusals_total',
    'counter',
    'Writes refused (507 STORE_FULL) because the store had reached its share of the disk cap.',
  ),
  f(
    'store_publish_limit_bytes',
    'gauge',
    'Size of store.log from which publishes are refused (507) under the disk cap.',
  ),
  f('store_skipped_damaged_ranges', 'gauge', 'Damaged byte ranges of store.log the start-up check skipped.'),
  f('store_skipped_damaged_bytes', 'gauge', 'Bytes in the damaged ranges the start-up check skipped.'),
  f(
    'disk_cap_bytes',
    'gauge',
    'The disk cap (--disk-cap-bytes) that store, logs and damaged copies stay under together.',
  ),
  f('disk_budget_bytes', 'gauge', 'The share of the disk cap of each part: store, logs, damaged_copies.'),
  f(
    'disk_used_bytes',
    'gauge',
    'Bytes on disk of each part: store (store.log and a compaction file), logs (server.log and its rotated files), damaged_copies.',
  ),
  // Replication (the store's process), per peer /v1/replicate URL.
  f('replication_last_sequence', 'gauge', 'Highest sequence number this server stamped on a store record.'),
  f('replication_queue_items', 'gauge', 'Changed items not yet acknowledged by the peer.'),
  f('replication_lag_seconds', 'gauge', 'Age of the oldest item the peer has not acknowledged (0 when none).'),
  f('replication_lag_sequences', 'gauge', "This server's own events the peer has not acknowledged."),
  f('replication_acked_sequence', 'gauge', "Highest sequence of this server's own events the peer acknowledged."),
  f('replication_sent_events_total', 'counter', 'Events sent to the peer and acknowledged.'),
  f('replication_errors_total', 'counter', 'Failed attempts to send to the peer.'),
  f(
    'replication_last_success_timestamp_seconds',
    'gauge',
    'When the peer last acknowledged a batch (absent before the first).',
  ),
  // TLS (the store's process; every process serves the same certificate).
  f(
    'tls_certificate_expiry_timestamp_seconds',
    'gauge',
    'When the certificate the server serves expires (notAfter), in seconds since the epoch.',
  ),
  // Each process, labelled process="store" or "fetch-N".
  f('start_time_seconds', 'gauge', 'When the process started, in seconds since the epoch.'),
  f('process_resident_memory_bytes', 'gauge', 'Resident set size of the process.'),
  f('process_heap_used_bytes', 'gauge', 'V8 heap in use in the process.'),
  f('event_loop_delay_p50_seconds', 'gauge', 'Median event-loop delay over the last complete 15 s window.'),
  f('event_loop_delay_p99_seconds', 'gauge', '99th percentile event-loop delay over the last complete 15 s window.'),
  f('event_loop_delay_max_seconds', 'gauge', 'Largest event-loop delay over the last complete 15 s window.'),
];

export const familyByName: ReadonlyMap<string, Family> = new Map(FAMILIES.map((x) => [x.name, x]));

/** The full name of family `short` (without the stash_keyserver_ prefix); throws for a name not in the catalog. */
export function metricName(short: string): string {
  const name = `${P}${short}`;
  if (!familyByName.has(name)) throw new Error(`no metric family ${name}`);
  return name;
}
