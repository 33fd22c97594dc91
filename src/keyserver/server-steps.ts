/**
 * The steps of startServer (server.ts), each one part of a key server
 * process's start: the store, the port, the certificate, the URLs, the
 * replication workers, the service and its app, the fetch processes, and
 * the close and reload the running server offers.
 */
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { hostname } from 'node:os';
import { StashError } from '../errors.js';
import { createApp, type KeyServerApp } from './app.js';
import { createLimiters, localBackend, type KeyServerBackend, type Limiters } from './backend.js';
import type { Clock } from './clock.js';
import { realPaths } from './install/paths.js';
import type { Logger } from './logger.js';
import type { Mailer } from './mailer.js';
import { ServerMetrics } from './metrics/server-metrics.js';
import { FetchProcesses } from './multi/store-side.js';
import { applyReload } from './reload.js';
import { ReplicationReceiver } from './replication/inbound.js';
import { Replicator } from './replication/outbound.js';
import type { ServerConfig, ServiceConfig } from './server-config.js';
import type { RunningServer, StartOptions, Timeouts } from './server.js';
import { ShareService } from './service.js';
import { ShareStore } from './store/share-store.js';
import type { TlsMaterial } from './tls/profile.js';
import type { ServerCertificates } from './tls/server-certificates.js';

/** The topology id of the server a replication URL points at, when its origin matches an entry's URL. */
function peerIdFromTopology(config: ServerConfig, peerUrl: string): number | undefined {
  const origin = new URL(peerUrl).origin;
  return config.topologyServers.find((s) => new URL(s.url).origin === origin)?.id;
}

/**
 * The store, opened with a clear word when the state folder is not ours to
 * write: an unprivileged `run` meets the installed service's default folder.
 */
export async function openStore(options: Parameters<typeof ShareStore.open>[0]): Promise<ShareStore> {
  try {
    return await ShareStore.open(options);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code !== 'EACCES' && code !== 'EPERM') throw err;
    const hint =
      options.dir === realPaths.state
        ? "it is the installed service's folder; give --state-dir PATH for a folder of your own, or --developer for a throwaway one"
        : 'choose a folder you can write to with --state-dir PATH, or use --developer for a throwaway one';
    throw new StashError(
      'EACCES',
      `cannot use the state folder ${options.dir}: permission denied (${(err as Error).message}); ${hint}`,
    );
  }
}

export function hostForUrl(host: string): string {
  return host.includes(':') ? `[${host}]` : host;
}

/**
 * How long fetch counts are coalesced before their records are written: a
 * hot share gets one fetch_count record per window however often it is
 * fetched (a window ends early once FETCH_FLUSH_BATCH shares have changed
 * counts, store/share-store.ts). A crash loses at most this window's
 * increments (counts merge by maximum, so a lost increment never goes
 * backwards elsewhere).
 */
export const FETCH_FLUSH_MS = 1000;

/** The store's options from the configuration and the test overrides. */
export function storeOptions(
  opts: StartOptions,
  originEpoch: number,
  clock: Clock,
  logger: Logger,
): Parameters<typeof ShareStore.open>[0] {
  const config = opts.config;
  return {
    dir: config.stateDir,
    serverId: config.serverId,
    originEpoch,
    compactMinBytes: config.compactMinBytes,
    diskCapBytes: config.diskCapBytes,
    clock,
    logger,
    ...(opts.store?.sweepIntervalMs !== undefined ? { sweepIntervalMs: opts.store.sweepIntervalMs } : {}),
    fetchFlushMs: opts.store?.fetchFlushMs ?? FETCH_FLUSH_MS,
  };
}

/** The process's counters, limits, service and Koa app over `store`. */
export function buildApp(
  opts: StartOptions,
  deps: {
    serviceConfig: ServiceConfig;
    store: ShareStore;
    clock: Clock;
    logger: Logger;
    mailer: Mailer;
    replicator: Replicator | undefined;
    tls: TlsMaterial | undefined;
    timeouts: Timeouts;
  },
): {
  metrics: ServerMetrics;
  limiters: Limiters;
  service: ShareService;
  backend: KeyServerBackend;
  keyServer: KeyServerApp;
} {
  const { serviceConfig, store, clock, logger, mailer, replicator, tls, timeouts } = deps;
  const metrics = new ServerMetrics({ store, config: serviceConfig, logger });
  metrics.replicator = replicator;
  if (tls) metrics.certificate.set(tls.cert);
  const limiters = createLimiters(serviceConfig, clock);
  const service = new ShareService({
    store,
    clock,
    mailer,
    config: serviceConfig,
    logger,
    emailLimiter: limiters.emails,
    emailIpLimiter: limiters.emailIps,
    ...(replicator ? { replicator } : {}),
    metrics: metrics.process,
  });
  const backend = localBackend(service, receiverOf(serviceConfig, store, logger), metrics.render);
  const keyServer = createApp({
    backend,
    limiters,
    clock,
    config: serviceConfig,
    logger,
    bodyTimeoutMs: timeouts.bodyMs,
    metrics: metrics.process,
    ...(opts.fastFetch !== undefined ? { fastFetch: opts.fastFetch } : {}),
  });
  return { metrics, limiters, service, backend, keyServer };
}

/** Binds the port; on failure closes the store and says which address could not be had. */
export async function listen(server: Server, config: ServerConfig, store: ShareStore, logger: Logger): Promise<void> {
  try {
    await new Promise<void>((ok, fail) => {
      server.once('error', fail);
      server.listen(config.bind.port, config.bind.host, () => {
        server.off('error', fail);
        ok();
      });
    });
  } catch (err) {
    await store.close();
    const code = (err as NodeJS.ErrnoException).code ?? 'LISTEN_FAILED';
    throw new StashError(code, `cannot listen on ${config.bind.host}:${config.bind.port}: ${(err as Error).message}`);
  }
  server.on('error', (err) => logger.error(`http server: ${err.message}`));
  server.on('tlsClientError', () => undefined); // scanners and plain-HTTP clients on the TLS port
}

/** The first certificate (ACME: ordered now the port is bound); without one, the server and store close. */
export async function firstCertificate(
  server: Server,
  certs: ServerCertificates,
  store: ShareStore,
): Promise<TlsMaterial | undefined> {
  try {
    return await certs.first(server);
  } catch (err) {
    // No certificate over ACME: nothing to serve. The error says which step failed (exit 76).
    await new Promise<void>((done) => {
      server.close(() => done());
      server.closeAllConnections();
    });
    await store.close();
    throw err;
  }
}

/** The URL the server listens on, and the public one its links use (with a warning when it is a guess). */
export function urlsOf(
  server: Server,
  config: ServerConfig,
  https: boolean,
  certs: ServerCertificates,
  logger: Logger,
): { url: string; publicUrl: string } {
  const port = (server.address() as AddressInfo).port;
  const scheme = https ? 'https' : 'http';
  const url = `${scheme}://${hostForUrl(config.bind.host)}:${port}`;
  let publicUrl = config.publicUrl ?? certs.defaultPublicUrl(port);
  if (publicUrl === undefined) {
    const wildcard = config.bind.host === '0.0.0.0' || config.bind.host === '::';
    publicUrl = wildcard ? `${scheme}://${hostname()}:${port}` : url;
    if (wildcard) logger.warn(`listening on all addresses: verification links will use ${publicUrl}; set --public-url`);
  }
  return { url, publicUrl };
}

/** The receiver of peers' replication batches. */
export function receiverOf(serviceConfig: ServiceConfig, store: ShareStore, logger: Logger): ReplicationReceiver {
  return new ReplicationReceiver(
    {
      serverId: serviceConfig.serverId,
      clusterId: serviceConfig.clusterId,
      token: serviceConfig.replicationToken,
      // Read at each request: a reload may change the topology.
      get topologyServers() {
        return serviceConfig.topologyServers;
      },
    },
    store,
    logger,
  );
}

/** The outbound replication workers, started, when peers and a token are configured. */
export function startReplicator(
  config: ServerConfig,
  opts: StartOptions,
  store: ShareStore,
  clock: Clock,
  logger: Logger,
): Replicator | undefined {
  if (config.replicationPeerUrls.length === 0) return undefined;
  if (config.replicationToken === undefined) {
    logger.warn('--replication-peer-url without --replication-token: replication is off');
    return undefined;
  }
  const replicator = new Replicator(
    {
      serverId: config.serverId,
      clusterId: config.clusterId,
      token: config.replicationToken,
      peers: config.replicationPeerUrls.map((url) => ({ url, serverId: peerIdFromTopology(config, url) })),
      ...opts.replication,
    },
    store,
    clock,
    logger,
  );
  replicator.start();
  return replicator;
}

/** The fetch processes (StartOptions.processes > 1), started and handed connections of `server`. */
export async function startFetchProcesses(
  opts: StartOptions,
  deps: Omit<
    ConstructorParameters<typeof FetchProcesses>[0],
    'count' | 'tls' | 'keepConnections' | 'metricsText' | 'logSink'
  > & {
    certs: ServerCertificates;
    metrics: ServerMetrics;
    server: Server;
  },
): Promise<FetchProcesses | undefined> {
  if ((opts.processes ?? 1) <= 1) return undefined;
  const { certs, metrics, server, ...rest } = deps;
  const fetchProcesses = new FetchProcesses({
    ...rest,
    count: opts.processes! - 1,
    tls: () => certs.material,
    keepConnections: () => certs.challengePending(),
    metricsText: metrics.render,
    ...(opts.logSink ? { logSink: opts.logSink } : {}),
  });
  metrics.fetchProcesses = fetchProcesses;
  fetchProcesses.takeConnections(server);
  await fetchProcesses.start();
  return fetchProcesses;
}

/** RunningServer.close: once, in order (the fetch processes send their last counts before the store closes). */
export function closer(
  server: Server,
  store: ShareStore,
  metrics: ServerMetrics,
  [fetchProcesses, certs, replicator]: [FetchProcesses | undefined, ServerCertificates, Replicator | undefined],
): () => Promise<void> {
  let closing: Promise<void> | undefined;
  return () => {
    closing ??= (async () => {
      const closed = new Promise<void>((done) => {
        server.close(() => done());
        server.closeIdleConnections();
        setTimeout(() => server.closeAllConnections(), 2000).unref();
      });
      await fetchProcesses?.stop();
      await closed;
      await certs.stop();
      await replicator?.stop();
      await metrics.close();
      await store.close();
    })();
    return closing;
  };
}

/** RunningServer.reload and reloadFailed, which keep the service's configState. */
export function reloaders(
  service: ShareService,
  reloading: Parameters<typeof applyReload>[0],
  metrics: ServerMetrics,
  fetchProcesses: FetchProcesses | undefined,
  clock: Clock,
): Pick<RunningServer, 'reload' | 'reloadFailed'> {
  const state = service.configState;
  const serviceConfig = reloading.config;
  const reload = async (next: ServerConfig) => {
    const result = await applyReload(reloading, next);
    if (result.applied.includes('tls_cert') && serviceConfig.tlsCert !== undefined)
      await metrics.certificateReloaded(serviceConfig.tlsCert).catch(() => undefined);
    fetchProcesses?.reloaded(next);
    state.loadedAt = clock.now();
    state.reloadError = undefined;
    return result;
  };
  const reloadFailed = (message: string) => {
    state.reloadError = message;
    reloading.logger.error(`reload: the configuration was not applied: ${message}; the running configuration stays`);
  };
  return { reload, reloadFailed };
}
