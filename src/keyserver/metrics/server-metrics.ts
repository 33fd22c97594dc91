/**
 * The metrics of a running server, put together in one object so that
 * server.ts only hands it what it has: this process's counters (given to
 * the service and the app), the certificate it serves, the fetch processes
 * once they run, and the optional --metrics-bind listener.
 */
import { readFile } from 'node:fs/promises';
import type { ServerConfig } from '../server-config.js';
import { LOG_FILES_KEPT } from '../disk/budget.js';
import type { Logger } from '../logger.js';
import type { FetchProcesses } from '../multi/store-side.js';
import type { Replicator } from '../replication/outbound.js';
import type { ShareStore } from '../store/share-store.js';
import { startMetricsServer, type MetricsServer } from './metrics-server.js';
import { ProcessMetrics } from './process-metrics.js';
import { renderServerMetrics } from './server-view.js';
import { ServedCertificate } from './tls-expiry.js';

export class ServerMetrics {
  /** The store's process's own counters and gauges. */
  readonly process = new ProcessMetrics('store');
  readonly certificate = new ServedCertificate();
  replicator: Replicator | undefined;
  fetchProcesses: FetchProcesses | undefined;
  private listener: MetricsServer | undefined;

  constructor(private readonly d: { store: ShareStore; config: ServerConfig; logger: Logger }) {}

  /** The text of GET /metrics (every process's counts, asked for now). */
  readonly render = (): Promise<string> => {
    const { store, config } = this.d;
    const fp = this.fetchProcesses;
    return renderServerMetrics({
      metrics: this.process,
      store,
      stateDir: config.stateDir,
      logFile: config.logFile === undefined ? undefined : { path: config.logFile, kept: LOG_FILES_KEPT },
      replicator: () => this.replicator,
      certificate: this.certificate,
      ...(fp ? { gather: (own) => fp.gather(own) } : {}),
    });
  };

  /** Where --metrics-bind serves, once listen() has bound it. */
  get url(): string | undefined {
    return this.listener?.url;
  }

  /** Starts the --metrics-bind listener, if configured. */
  async listen(): Promise<void> {
    const bind = this.d.config.metricsBind;
    if (bind === undefined) return;
    this.listener = await startMetricsServer(bind, this.render, this.process, this.d.logger);
    this.d.logger.info(`metrics: GET /metrics served on ${this.listener.url}`);
  }

  /** The certificate file was read again (a reload): its expiry from now on. */
  async certificateReloaded(certPath: string): Promise<void> {
    this.certificate.set(await readFile(certPath));
  }

  async close(): Promise<void> {
    await this.listener?.close();
    this.process.close();
  }
}
