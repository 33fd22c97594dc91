/**
 * Starts a key server: checks the files it needs, opens the store, builds the
 * app and listens with HTTP or, given --tls-cert/--tls-key, HTTPS. Timeouts
 * bound slow clients: headers must arrive within `headersMs`, a whole request
 * within `requestMs`, a body within `bodyMs`; idle keep-alive sockets close.
 */
import { createServer as createPlainServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Server as HttpsServer } from 'node:https';
import type { KeyServerApp } from './app.js';
import type { ServerConfig, ServiceConfig } from './server-config.js';
import { systemClock, type Clock } from './clock.js';
import { streamLogger, type Logger } from './logger.js';
import { configuredMailer, type Mailer } from './mailer.js';
import type { ShareService } from './service.js';
import type { FetchProcesses } from './multi/store-side.js';
import type { ServerMetrics } from './metrics/server-metrics.js';
import type { ShareStore } from './store/share-store.js';
import type { ReloadResult } from './reload.js';
import { createHttpsServer } from './tls/https-server.js';
import { installFetchFront, type FrontFetch } from './http/fetch-front.js';
import {
  buildApp,
  closer,
  firstCertificate,
  listen,
  openStore,
  reloaders,
  startFetchProcesses,
  startReplicator,
  storeOptions,
  urlsOf,
} from './server-steps.js';
import { ServerCertificates } from './tls/server-certificates.js';
import type { AlpnChallengeResponder } from './tls/port-guard.js';
import { profileOptions, type TlsMaterial } from './tls/profile.js';
import type { Replicator, ReplicationSettings } from './replication/outbound.js';

export interface Timeouts {
  headersMs: number;
  requestMs: number;
  bodyMs: number;
  keepAliveMs: number;
  /** How often Node checks the header/request deadlines. */
  checkIntervalMs: number;
}

export const defaultTimeouts: Timeouts = {
  headersMs: 10_000,
  requestMs: 20_000,
  bodyMs: 10_000,
  keepAliveMs: 5_000,
  checkIntervalMs: 1_000,
};

export interface StartOptions {
  config: ServerConfig;
  clock?: Clock;
  logger?: Logger;
  /** Overrides the mailer chosen from the configuration (tests). */
  mailer?: Mailer;
  /** Where developer mode prints verification links (default stdout). */
  console?: NodeJS.WritableStream;
  timeouts?: Partial<Timeouts>;
  store?: { sweepIntervalMs?: number; fetchFlushMs?: number };
  /** Backoff bounds of the outbound replication workers (tests shorten them). */
  replication?: Pick<ReplicationSettings, 'minBackoffMs' | 'maxBackoffMs' | 'timeoutMs'>;
  mailTimeoutMs?: number;
  /** Answer fetches in front of Koa (default true; tests turn it off to compare). */
  fastFetch?: boolean;
  /** Processes serving requests: this one and processes - 1 fetch processes (multi/store-side.ts; default 1). */
  processes?: number;
  /** The log file (--log-file) the fetch processes' lines go to through this process (default: their stderr). */
  logSink?: { write(text: string): unknown };
}

export { FETCH_FLUSH_MS } from './server-steps.js';

export interface RunningServer {
  /** Where this process listens, e.g. http://127.0.0.1:41234. */
  url: string;
  config: ServiceConfig;
  server: Server;
  store: ShareStore;
  service: ShareService;
  keyServer: KeyServerApp;
  replicator: Replicator | undefined;
  /** The fetch processes, with StartOptions.processes > 1. */
  fetchProcesses: FetchProcesses | undefined;
  /** GET /metrics of the whole server, and the --metrics-bind listener. */
  metrics: ServerMetrics;
  /**
   * Applies a configuration read again (SIGHUP): what can change live is in
   * use when this resolves, the rest is logged and kept (reload.ts).
   */
  reload(next: ServerConfig): Promise<ReloadResult>;
  /** Records a reload that could not even be read (a bad config file): the old configuration stays. */
  reloadFailed(message: string): void;
  close(): Promise<void>;
}

/**
 * The HTTP(S) server of a key server process, with its limits and timeouts (the fetch processes use the same).
 * HTTPS when `tls` is given, or with `https.acme` before ACME has a certificate; the TLS handshake
 * is bound by the headers deadline (tls/https-server.ts).
 */
export function createHttpServer(
  timeouts: Timeouts,
  tls: TlsMaterial | undefined,
  handler: (req: IncomingMessage, res: ServerResponse) => void,
  https: { acme?: boolean; challenges?: AlpnChallengeResponder } = {},
  front?: () => FrontFetch | undefined,
): Server {
  const serverOptions = {
    requestTimeout: timeouts.requestMs,
    headersTimeout: timeouts.headersMs,
    keepAliveTimeout: timeouts.keepAliveMs,
    connectionsCheckingInterval: timeouts.checkIntervalMs,
    maxHeaderSize: 8192,
  };
  const server: Server =
    tls || https.acme
      ? createHttpsServer(
          serverOptions,
          {
            material: tls,
            deadlineMs: timeouts.headersMs,
            ...(https.challenges ? { challenges: https.challenges } : {}),
          },
          handler,
        )
      : createPlainServer(serverOptions, handler);
  server.maxHeadersCount = 64;
  if (front) installFetchFront(server, tls !== undefined || https.acme === true, front);
  return server;
}

/** Starts listening; resolves once the port is bound and the store is open. */
export async function startServer(opts: StartOptions): Promise<RunningServer> {
  const config = opts.config;
  const clock = opts.clock ?? systemClock;
  const logger = opts.logger ?? streamLogger();
  const timeouts = { ...defaultTimeouts, ...opts.timeouts };

  // The --tls-cert files, or ACME's stored certificate (none yet: one is ordered once the port is bound).
  const certs = await ServerCertificates.open(config, logger);
  const mailer = opts.mailer ?? (await configuredMailer(config, logger, opts));
  const originEpoch = config.originEpoch ?? clock.now();
  const store = await openStore(storeOptions(opts, originEpoch, clock, logger));

  // The app needs the public URL, which needs the bound port (port 0 in tests):
  // requests are handed over once both exist.
  let handler: (req: IncomingMessage, res: ServerResponse) => void = (_req, res) => {
    res.statusCode = 503;
    res.end();
  };
  let front: FrontFetch | undefined;
  const server = createHttpServer(
    timeouts,
    certs.material,
    (req, res) => handler(req, res),
    certs.https,
    () => front,
  );
  await listen(server, config, store, logger);
  const tls = await firstCertificate(server, certs, store);
  const { url, publicUrl } = urlsOf(server, config, tls !== undefined, certs, logger);
  const serviceConfig: ServiceConfig = { ...config, publicUrl, originEpoch };
  // Said before any client finds out; the server still starts (a renewal may be under way).
  certs.warn(publicUrl);
  const replicator = startReplicator(config, opts, store, clock, logger);
  const app = { serviceConfig, store, clock, logger, mailer, replicator, tls, timeouts };
  const { metrics, limiters, service, backend, keyServer } = buildApp(opts, app);
  handler = keyServer.callback;
  front = keyServer.front;
  const fetchProcesses = await startFetchProcesses(opts, {
    config: serviceConfig,
    timeouts,
    service,
    backend,
    limiter: limiters.requests,
    store,
    logger,
    certs,
    metrics,
    server,
  });
  renewCertificates(certs, server, fetchProcesses, metrics);
  const close = closer(server, store, metrics, [fetchProcesses, certs, replicator]);
  try {
    await metrics.listen();
  } catch (err) {
    await close();
    throw err;
  }
  const reloading = { config: serviceConfig, limiters, store, server, logger };
  const { reload, reloadFailed } = reloaders(service, reloading, metrics, fetchProcesses, clock);
  return {
    url,
    config: serviceConfig,
    server,
    store,
    service,
    keyServer,
    replicator,
    fetchProcesses,
    metrics,
    reload,
    reloadFailed,
    close,
  };
}

/** A renewed ACME certificate serves new connections at once, in every process. */
function renewCertificates(
  certs: ServerCertificates,
  server: Server,
  fetchProcesses: FetchProcesses | undefined,
  metrics: ServerMetrics,
): void {
  certs.renew((m) => {
    (server as unknown as HttpsServer).setSecureContext(profileOptions(m));
    fetchProcesses?.tlsRenewed(m);
    metrics.certificate.set(m.cert);
  });
}
