/**
 * A fetch process (`stash_key_server run --processes N` starts N - 1 of
 * them; store-side.ts): the same HTTP server and app as the store's process,
 * over a RemoteBackend instead of the store, with a copy of the live shares
 * (replica.ts). It never listens: the store's process hands it connections.
 * It holds nothing that must survive it: every write is the store's
 * process's, answered only once durable there; what it holds is fetch counts
 * of at most COUNT_FLUSH_MS (sent when it stops) and copies it can lose.
 *
 * It ends when the store's process does (the IPC channel closes: nothing
 * could be written any more), and on the store's process's 'stop' note or
 * SIGTERM (systemd signals the whole service): it stops taking requests,
 * finishes those in flight, sends its last counts and exits.
 */
import type { Server } from 'node:http';
import type { Server as HttpsServer } from 'node:https';
import type { Socket } from 'node:net';
import { errorMessage } from '../../errors.js';
import { createApp } from '../app.js';
import { createLimiters } from '../backend.js';
import type { ServerConfig } from '../server-config.js';
import { systemClock } from '../clock.js';
import { StoreUnavailableError } from '../errors.js';
import { streamLogger, type Logger } from '../logger.js';
import { REPORT_MS } from '../metrics/gather.js';
import { ProcessMetrics } from '../metrics/process-metrics.js';
import { applyReload } from '../reload.js';
import { createHttpServer } from '../server.js';
import { readTls } from '../tls-files.js';
import { profileOptions, type TlsMaterial } from '../tls/profile.js';
import { Channel } from './channel.js';
import { RemoteBackend } from './remote-backend.js';
import { Replica } from './replica.js';
import { LIMIT_SYNC_MS, type FetchProcessInit } from './store-side.js';

function prefixed(logger: Logger, prefix: string): Logger {
  return {
    info: (m) => logger.info(`${prefix}${m}`),
    warn: (m) => logger.warn(`${prefix}${m}`),
    error: (m) => logger.error(`${prefix}${m}`),
  };
}

/** One fetch process: its channel to the store's process, and once 'init' came, its HTTP server. */
class FetchProcess {
  logger = prefixed(streamLogger(), 'fetch process: ');
  stopping: Promise<void> | undefined;
  private server: Server | undefined;
  private backend: RemoteBackend | undefined;
  private metrics: ProcessMetrics | undefined;
  private readonly pendingSockets: Socket[] = [];
  private readonly channel: Channel;

  constructor() {
    this.channel = new Channel(
      process,
      {
        init: (init: FetchProcessInit) =>
          this.start(init).catch((err: unknown) => {
            this.logger.error(`cannot start: ${errorMessage(err)}`);
            process.exit(1);
          }),
        stop: () => void this.stop('stopping'),
      },
      this.logger,
      () => new StoreUnavailableError('the store process of this server is not reachable; try again'),
      (socket) => this.take(socket),
    );
  }

  /** Stops taking requests, finishes those in flight, sends the last counts and exits. */
  stop(why: string): Promise<void> {
    this.stopping ??= (async () => {
      this.logger.info(`${why}: finishing the requests in flight`);
      if (this.server) {
        const s = this.server;
        await new Promise<void>((done) => {
          s.close(() => done());
          s.closeIdleConnections();
          setTimeout(() => s.closeAllConnections(), 2000).unref();
        });
      }
      await this.backend?.flushCounts();
      // The last counts, so that the server's totals keep them (metrics/gather.ts).
      const last = this.metrics?.report();
      if (last && process.connected) {
        // Sent, not only queued, before the exit.
        await new Promise<void>((done) =>
          process.send!({ k: 'note', m: 'metrics', p: last }, undefined, {}, () => done()),
        );
      }
      process.exit(0);
    })();
    return this.stopping;
  }

  /** The init note: takes the copy of the shares, starts the HTTP server, says 'ready' once both are done. */
  private async start(init: FetchProcessInit): Promise<void> {
    const { channel } = this;
    this.logger = prefixed(streamLogger(), `fetch process ${init.index}: `);
    const logger = this.logger;
    const config = init.config;
    // The copy of the shares follows this note on the channel: take it from the first chunk on.
    const replica = new Replica(config.serverId);
    let copied = false;
    let serving = false;
    const readyWhenBoth = () => {
      if (!copied || !serving) return;
      logger.info(`${replica.size} live share(s) copied from the store process`);
      process.send!({ k: 'note', m: 'ready', p: process.pid });
    };
    channel.handle('replica', (frames: Uint8Array) => replica.apply(frames));
    channel.handle('replica-done', () => {
      copied = true;
      readyWhenBoth();
    });
    // ACME's certificate comes with the init note; --tls-cert files are read here as in the store's process.
    const tls =
      init.tls ??
      (config.tlsCert !== undefined && config.tlsKey !== undefined
        ? await readTls(config.tlsCert, config.tlsKey)
        : undefined);
    this.server = this.serve(init, replica, tls);
    for (const socket of this.pendingSockets.splice(0)) this.take(socket);
    // Connections come once the copy of the shares is complete.
    serving = true;
    readyWhenBoth();
  }

  /** The app over a RemoteBackend and its HTTP server, which follows the store's process's notes (tls, limits, reload). */
  private serve(init: FetchProcessInit, replica: Replica, tls: TlsMaterial | undefined): Server {
    const { channel, logger } = this;
    const config = init.config;
    const clock = systemClock;
    const metrics = new ProcessMetrics(`fetch-${init.index}`);
    this.metrics = metrics;
    channel.handle('metrics', () => metrics.report());
    setInterval(() => channel.note('metrics', metrics.report()), REPORT_MS).unref();
    const backend = new RemoteBackend(channel, replica, config, clock, metrics);
    this.backend = backend;
    setInterval(() => replica.purge(clock.now()), 60_000).unref();
    const limiters = createLimiters(config, clock);
    limiters.requests.trackConsumption();
    const app = createApp({ backend, limiters, clock, config, logger, bodyTimeoutMs: init.timeouts.bodyMs, metrics });
    const s = createHttpServer(
      init.timeouts,
      tls,
      app.callback,
      { acme: config.acmeDomains.length > 0 },
      () => app.front,
    );
    // A renewed ACME certificate (store-side.ts tlsRenewed), with the same TLS profile.
    channel.handle('tls', (material: TlsMaterial) =>
      (s as unknown as HttpsServer).setSecureContext(profileOptions(material)),
    );
    s.on('error', (err) => logger.error(`http server: ${err.message}`));
    s.on('tlsClientError', () => undefined);
    // It never listens (connections come from the store's process), but node:http checks the
    // header and request deadlines of its connections only once its server has said 'listening'.
    s.emit('listening');
    setInterval(() => {
      const taken = limiters.requests.takeConsumed();
      if (taken.length > 0) channel.note('limits', taken);
    }, LIMIT_SYNC_MS).unref();
    channel.handle('limits', (taken: Array<[string, number]>) => {
      for (const [key, n] of taken) limiters.requests.debit(key, n);
    });
    channel.handle('reload', async (next: ServerConfig) => {
      // The store's process logs what changed; this one applies the same and logs only failures.
      const quiet: Logger = { info: () => {}, warn: () => {}, error: logger.error };
      await applyReload({ config, limiters, server: s, logger: quiet }, next).catch((err: unknown) =>
        logger.error(`reload: ${errorMessage(err)}`),
      );
    });
    return s;
  }

  /** A connection handed over by the store's process: kept until the server is up, refused once stopping. */
  private take(socket: Socket): void {
    if (!this.server) {
      this.pendingSockets.push(socket);
      return;
    }
    if (this.stopping) {
      socket.destroy();
      return;
    }
    this.server.emit('connection', socket);
    socket.resume();
  }
}

/** Runs a fetch process until the store's process stops it or goes away. */
export async function runFetchProcess(): Promise<void> {
  if (!process.send) throw new Error('__fetch-process is started by `stash_key_server run --processes N`, not by hand');
  const fetcher = new FetchProcess();
  process.once('SIGTERM', () => void fetcher.stop('SIGTERM'));
  process.once('SIGINT', () => void fetcher.stop('SIGINT'));
  // The store's process is gone (killed, crashed): nothing can be written any more, and a new
  // one starts its own fetch processes. Exit at once; connections here are reset.
  process.once('disconnect', () => {
    if (!fetcher.stopping) {
      fetcher.logger.error('the store process went away; exiting');
      process.exit(1);
    }
  });
  await new Promise<void>((done) => process.once('disconnect', () => done()));
}
