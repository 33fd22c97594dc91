/**
 * Starts a key server: checks the files it needs, opens the store, builds the
 * app and listens with HTTP or, given --tls-cert/--tls-key, HTTPS. Timeouts
 * bound slow clients: headers must arrive within `headersMs`, a whole request
 * within `requestMs`, a body within `bodyMs`; idle keep-alive sockets close.
 */
import { constants } from 'node:fs';
import { access } from 'node:fs/promises';
import { createServer as createPlainServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Server as HttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { hostname } from 'node:os';
import { resolve } from 'node:path';
import { ConfigError, StashError } from '../errors.js';
import { realPaths } from './install/paths.js';
import { createApp, type KeyServerApp } from './app.js';
import type { ServerConfig, ServiceConfig } from './server-config.js';
import { systemClock, type Clock } from './clock.js';
import { streamLogger, type Logger } from './logger.js';
import { commandMailer, consoleMailer, noMailer, type Mailer } from './mailer.js';
import { ShareService } from './service.js';
import { createLimiters, localBackend } from './backend.js';
import { FetchProcesses } from './multi/store-side.js';
import { ServerMetrics } from './metrics/server-metrics.js';
import { ShareStore } from './store/share-store.js';
import { applyReload, type ReloadResult } from './reload.js';
import { createHttpsServer } from './tls/https-server.js';
import { installFetchFront, type FrontFetch } from './http/fetch-front.js';
import { ServerCertificates } from './tls/server-certificates.js';
import type { AlpnChallengeResponder } from './tls/port-guard.js';
import { profileOptions, type TlsMaterial } from './tls/profile.js';
import { ReplicationReceiver } from './replication/inbound.js';
import { Replicator, type ReplicationSettings } from './replication/outbound.js';

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

/**
 * How long fetch counts are coalesced before their records are written: a
 * hot share gets one fetch_count record per window however often it is
 * fetched (a window ends early once FETCH_FLUSH_BATCH shares have changed
 * counts, store/share-store.ts). A crash loses at most this window's
 * increments (counts merge by maximum, so a lost increment never goes
 * backwards elsewhere).
 */
export const FETCH_FLUSH_MS = 1000;

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

/** The topology id of the server a replication URL points at, when its origin matches an entry's URL. */
function peerIdFromTopology(config: ServerConfig, peerUrl: string): number | undefined {
  const origin = new URL(peerUrl).origin;
  return config.topologyServers.find((s) => new URL(s.url).origin === origin)?.id;
}

/**
 * The store, opened with a clear word when the state folder is not ours to
 * write: an unprivileged `run` meets the installed service's default folder.
 */
async function openStore(options: Parameters<typeof ShareStore.open>[0]): Promise<ShareStore> {
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

function hostForUrl(host: string): string {
  return host.includes(':') ? `[${host}]` : host;
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
  let tls = certs.material;

  let mailer = opts.mailer;
  if (!mailer) {
    if (config.verificationEmailCommand !== undefined) {
      const command = resolve(config.verificationEmailCommand);
      try {
        await access(command, constants.X_OK);
      } catch {
        throw new ConfigError(`--verification-email-command ${command}: not an executable file`);
      }
      mailer = commandMailer(command, logger, opts.mailTimeoutMs);
    } else if (config.developer) {
      mailer = consoleMailer(opts.console);
    } else {
      logger.warn(
        'no --verification-email-command: publishers will get no verification link (use --developer to print links)',
      );
      mailer = noMailer(logger);
    }
  }

  const originEpoch = config.originEpoch ?? clock.now();
  const store = await openStore({
    dir: config.stateDir,
    serverId: config.serverId,
    originEpoch,
    compactMinBytes: config.compactMinBytes,
    diskCapBytes: config.diskCapBytes,
    clock,
    logger,
    ...(opts.store?.sweepIntervalMs !== undefined ? { sweepIntervalMs: opts.store.sweepIntervalMs } : {}),
    fetchFlushMs: opts.store?.fetchFlushMs ?? FETCH_FLUSH_MS,
  });

  // The app needs the public URL, which needs the bound port (port 0 in tests):
  // requests are handed over once both exist.
  let handler: (req: IncomingMessage, res: ServerResponse) => void = (_req, res) => {
    res.statusCode = 503;
    res.end();
  };
  let front: FrontFetch | undefined;
  const server = createHttpServer(
    timeouts,
    tls,
    (req, res) => handler(req, res),
    certs.https,
    () => front,
  );

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

  try {
    tls = await certs.first(server);
  } catch (err) {
    // No certificate over ACME: nothing to serve. The error says which step failed (exit 76).
    await new Promise<void>((done) => {
      server.close(() => done());
      server.closeAllConnections();
    });
    await store.close();
    throw err;
  }

  const port = (server.address() as AddressInfo).port;
  const scheme = tls ? 'https' : 'http';
  const url = `${scheme}://${hostForUrl(config.bind.host)}:${port}`;
  let publicUrl = config.publicUrl ?? certs.defaultPublicUrl(port);
  if (publicUrl === undefined) {
    const wildcard = config.bind.host === '0.0.0.0' || config.bind.host === '::';
    publicUrl = wildcard ? `${scheme}://${hostname()}:${port}` : url;
    if (wildcard) logger.warn(`listening on all addresses: verification links will use ${publicUrl}; set --public-url`);
  }
  const serviceConfig: ServiceConfig = { ...config, publicUrl, originEpoch };
  // Said before any client finds out; the server still starts (a renewal may be under way).
  certs.warn(publicUrl);
  const receiver = new ReplicationReceiver(
    {
      serverId: config.serverId,
      clusterId: config.clusterId,
      token: config.replicationToken,
      // Read at each request: a reload may change the topology.
      get topologyServers() {
        return serviceConfig.topologyServers;
      },
    },
    store,
    logger,
  );
  let replicator: Replicator | undefined;
  if (config.replicationPeerUrls.length > 0) {
    if (config.replicationToken === undefined) {
      logger.warn('--replication-peer-url without --replication-token: replication is off');
    } else {
      replicator = new Replicator(
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
    }
  }
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
  const backend = localBackend(service, receiver, metrics.render);
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
  handler = keyServer.callback;
  front = keyServer.front;
  let fetchProcesses: FetchProcesses | undefined;
  if ((opts.processes ?? 1) > 1) {
    fetchProcesses = new FetchProcesses({
      count: opts.processes! - 1,
      config: serviceConfig,
      timeouts,
      service,
      backend,
      limiter: limiters.requests,
      store,
      logger,
      tls: () => certs.material,
      keepConnections: () => certs.challengePending(),
      metricsText: metrics.render,
      ...(opts.logSink ? { logSink: opts.logSink } : {}),
    });
    metrics.fetchProcesses = fetchProcesses;
    fetchProcesses.takeConnections(server);
    await fetchProcesses.start();
  }
  // A renewed ACME certificate serves new connections at once, in every process.
  certs.renew((m) => {
    (server as unknown as HttpsServer).setSecureContext(profileOptions(m));
    fetchProcesses?.tlsRenewed(m);
    metrics.certificate.set(m.cert);
  });

  let closing: Promise<void> | undefined;
  const close = () => {
    closing ??= (async () => {
      const closed = new Promise<void>((done) => {
        server.close(() => done());
        server.closeIdleConnections();
        setTimeout(() => server.closeAllConnections(), 2000).unref();
      });
      // Before the store closes: the fetch processes send their last fetch counts as they stop.
      await fetchProcesses?.stop();
      await closed;
      await certs.stop();
      await replicator?.stop();
      await metrics.close();
      await store.close();
    })();
    return closing;
  };
  try {
    await metrics.listen();
  } catch (err) {
    await close();
    throw err;
  }
  const state = service.configState;
  const reload = async (next: ServerConfig) => {
    const result = await applyReload({ config: serviceConfig, limiters, store, server, logger }, next);
    if (result.applied.includes('tls_cert') && serviceConfig.tlsCert !== undefined)
      await metrics.certificateReloaded(serviceConfig.tlsCert).catch(() => undefined);
    fetchProcesses?.reloaded(next);
    state.loadedAt = clock.now();
    state.reloadError = undefined;
    return result;
  };
  const reloadFailed = (message: string) => {
    state.reloadError = message;
    logger.error(`reload: the configuration was not applied: ${message}; the running configuration stays`);
  };
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
