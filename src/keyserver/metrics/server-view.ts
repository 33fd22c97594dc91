/**
 * GET /metrics of a server: the counters of all its processes (gather.ts),
 * each process's gauges, and what only the store's process knows: the
 * store, the disk cap and its use, replication per peer, the certificate.
 * Rendered in the store's process; a fetch process asks it for the text.
 */
import { stat } from 'node:fs/promises';
import { join } from 'node:path';
import { listDamagedCopies } from '../disk/damaged-copies.js';
import type { Replicator } from '../replication/outbound.js';
import type { ShareStore } from '../store/share-store.js';
import { COMPACT_NAME, REPAIR_NAME } from '../store/state-dir.js';
import { metricName } from './catalog.js';
import { renderExposition } from './exposition.js';
import type { ProcessMetrics, ProcessReport } from './process-metrics.js';
import { ProcessReports } from './gather.js';
import { series } from './registry.js';
import type { ServedCertificate } from './tls-expiry.js';

export interface ServerViewDeps {
  metrics: ProcessMetrics;
  store: ShareStore;
  stateDir: string;
  /** server.log when the server writes it (--log-file), with how many rotated files it keeps. */
  logFile: { path: string; kept: number } | undefined;
  replicator: () => Replicator | undefined;
  certificate: ServedCertificate;
  /** With fetch processes: asks each for a fresh report (gather.ts) and returns the sums. */
  gather?: (own: ProcessReport) => Promise<ReturnType<ProcessReports['sum']>>;
}

const sizeOf = (path: string) =>
  stat(path).then(
    (s) => s.size,
    () => 0,
  );

async function diskUsed(d: ServerViewDeps): Promise<{ store: number; logs: number; damaged: number }> {
  const stats = d.store.stats();
  const side = (await sizeOf(join(d.stateDir, COMPACT_NAME))) + (await sizeOf(join(d.stateDir, REPAIR_NAME)));
  let logs = 0;
  if (d.logFile) {
    logs += await sizeOf(d.logFile.path);
    for (let i = 1; i <= d.logFile.kept; i++) logs += await sizeOf(`${d.logFile.path}.${i}`);
  }
  const damaged = (await listDamagedCopies(d.stateDir).catch(() => [])).reduce((n, c) => n + c.bytes, 0);
  return { store: stats.storeBytes + side, logs, damaged };
}

/** The text of GET /metrics. */
export async function renderServerMetrics(d: ServerViewDeps): Promise<string> {
  const own = d.metrics.report();
  const { counters, gauges } = d.gather ? await d.gather(own) : new ProcessReports().sum(own);
  const out = new Map(counters);
  for (const [s, v] of gauges) out.set(s, v);
  const put = (short: string, v: number, labels?: Record<string, string | number>) =>
    out.set(series(metricName(short), labels), v);

  const st = d.store.stats();
  const recovery = d.store.recovery;
  put('shares', st.sharesLive - st.sharesPending, { state: 'live' });
  put('shares', st.sharesPending, { state: 'pending' });
  put('store_bytes', st.storeBytes);
  put('store_records', st.records);
  put('store_compactions_total', st.compactions);
  put('store_full_refusals_total', st.fullRefusals);
  const b = d.store.budget;
  put('store_publish_limit_bytes', b.publishLimitBytes);
  put('store_skipped_damaged_ranges', recovery.skipped.length);
  put(
    'store_skipped_damaged_bytes',
    recovery.skipped.reduce((n, r) => n + r.to - r.from, 0),
  );
  put('disk_cap_bytes', b.capBytes);
  const used = await diskUsed(d);
  for (const [part, budget, bytes] of [
    ['store', b.storeBytes, used.store],
    ['logs', b.logsBytes, used.logs],
    ['damaged_copies', b.damagedBytes, used.damaged],
  ] as const) {
    put('disk_budget_bytes', budget, { part });
    put('disk_used_bytes', bytes, { part });
  }

  put('replication_last_sequence', st.lastSequence);
  for (const p of d.replicator()?.peers() ?? []) {
    const peer = { peer: p.url };
    put('replication_queue_items', p.pending, peer);
    put('replication_lag_seconds', p.lag_ms / 1000, peer);
    put('replication_lag_sequences', p.lag_sequences, peer);
    put('replication_acked_sequence', p.acked_sequence, peer);
    put('replication_sent_events_total', p.sent_events, peer);
    put('replication_errors_total', p.failed_attempts, peer);
    if (p.last_ok_at !== null) put('replication_last_success_timestamp_seconds', Date.parse(p.last_ok_at) / 1000, peer);
  }
  if (d.certificate.expiresAt !== undefined) put('tls_certificate_expiry_timestamp_seconds', d.certificate.expiresAt);
  return renderExposition(out);
}
