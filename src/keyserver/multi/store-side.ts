/**
 * The store's process's side of serving from several processes
 * (`run --processes N`; docs/benchmarks.md, "Multi-core fetch"): it starts
 * N - 1 fetch processes (fetch-process.ts), hands them connections, answers
 * their calls from its own service, and keeps them going.
 *
 * - Connections: the listening socket stays here. Each new connection goes,
 *   in turn, to this process or to a fetch process that is up, before a byte
 *   of it is read (node's handle passing, as node:cluster does); a keep-alive
 *   connection stays where it landed.
 * - Calls: a fetch of a share that is not live in a process's copy (counted
 *   here; a miss is charged or refused here, against this process's bucket of
 *   the address), fetch counts answered there, publish, the verification page and confirm,
 *   status, replication, unpublish and manage links. Answers are durable
 *   before they are sent, as for a request served here.
 * - Notes: the fetch process's copy of the live shares, a snapshot and then
 *   every durable change (replica-feed.ts); request tokens each process took,
 *   so that every client address has one allowance; a configuration reloaded.
 * - A fetch process that dies is started again (after 1 s, up to 30 s when
 *   it keeps dying); meanwhile this process serves every connection.
 */
import type { ChildProcess } from 'node:child_process';
import type { Server } from 'node:net';
import type { Socket } from 'node:net';
import type { Readable } from 'node:stream';
import type { KeyServerBackend } from '../backend.js';
import { StoreUnavailableError } from '../errors.js';
import type { RequestLimiter } from '../limits/token-bucket.js';
import type { Logger } from '../logger.js';
import { ASK_TIMEOUT_MS, ProcessReports } from '../metrics/gather.js';
import type { ProcessReport } from '../metrics/process-metrics.js';
import type { ShareService } from '../service.js';
import type { ServerConfig, ServiceConfig } from '../server-config.js';
import type { ShareStore } from '../store/share-store.js';
import type { Timeouts } from '../server.js';
import type { TlsMaterial } from '../tls/profile.js';
import { settleForwardedMiss } from '../http/share-fetch.js';
import { Channel, type Handlers } from './channel.js';
import type { ForwardedFetchCall } from './remote-backend.js';
import { ReplicaFeed } from './replica-feed.js';
import { startSelf } from '../sea/runtime.js';
import type { UnpublishRequest } from '../wire/messages.js';

/** What a fetch process is started with (its first message). */
export interface FetchProcessInit {
  index: number;
  config: ServiceConfig;
  timeouts: Timeouts;
  /** The certificate ACME obtained (with --tls-cert the fetch process reads the files itself). */
  tls?: TlsMaterial;
}

/** How often the request tokens taken in each process are exchanged. */
export const LIMIT_SYNC_MS = 100;
const START_TIMEOUT_MS = 30_000;
const STOP_TIMEOUT_MS = 5_000;

interface Child {
  index: number;
  proc: ChildProcess;
  channel: Channel;
  ready: boolean;
  startedAt: number;
}

export interface StoreSideDeps {
  /** Fetch processes to run (processes - 1). */
  count: number;
  config: ServiceConfig;
  timeouts: Timeouts;
  service: ShareService;
  backend: KeyServerBackend;
  limiter: RequestLimiter;
  store: ShareStore;
  logger: Logger;
  /** The ACME certificate in use, for a fetch process that starts (or starts again). */
  tls?: () => TlsMaterial | undefined;
  /** While true, new connections stay here: an ACME validation must reach the process that holds its challenge. */
  keepConnections?: () => boolean;
  /** GET /metrics of the whole server, for a scrape that reached a fetch process. */
  metricsText: () => Promise<string>;
  /** Where the fetch processes' log lines go (their stderr, piped here), when not to this process's stderr. */
  logSink?: { write(text: string): unknown };
}

/**
 * Copies a fetch process's stderr to `sink` in whole lines only: a line split across two reads
 * must not interleave with this process's lines.
 */
function pipeWholeLines(stderr: Readable, sink: { write(text: string): unknown }): void {
  let partial = '';
  stderr.setEncoding('utf8').on('data', (text: string) => {
    const end = text.lastIndexOf('\n');
    if (end < 0) {
      partial += text;
      return;
    }
    sink.write(partial + text.slice(0, end + 1));
    partial = text.slice(end + 1);
  });
  stderr.on('end', () => {
    if (partial !== '') sink.write(`${partial}\n`);
  });
}

export class FetchProcesses {
  private readonly children: Array<Child | undefined>;
  private readonly restartDelay: number[];
  private turn = 0;
  private stopping = false;
  private readonly feed: ReplicaFeed;
  private readonly limitTimer: NodeJS.Timeout;
  /** The fetch processes' counters and gauges (metrics/gather.ts). */
  private readonly reports = new ProcessReports();

  constructor(private readonly d: StoreSideDeps) {
    this.children = Array.from({ length: d.count }, () => undefined);
    this.restartDelay = Array.from({ length: d.count }, () => 1000);
    this.feed = new ReplicaFeed(d.store, () => Date.now());
    d.limiter.trackConsumption();
    this.limitTimer = setInterval(() => this.syncLimits(undefined, d.limiter.takeConsumed()), LIMIT_SYNC_MS);
    this.limitTimer.unref();
  }

  /** Starts every fetch process; resolves once each is up (or has failed: it is started again later). */
  async start(): Promise<void> {
    await Promise.all(this.children.map((_, i) => this.spawn(i)));
  }

  /**
   * The counters of every process summed with `own` (this process's), each
   * process's gauges: every fetch process that is up is asked for its
   * report now, so a scrape counts every request answered before it.
   */
  async gather(own: ProcessReport): Promise<ReturnType<ProcessReports['sum']>> {
    await Promise.all(
      this.children.map(async (c) => {
        if (!c?.ready || !c.channel.connected) return;
        let timer: NodeJS.Timeout | undefined;
        const late = new Promise<undefined>((done) => {
          timer = setTimeout(() => done(undefined), ASK_TIMEOUT_MS);
        });
        const report = await Promise.race([
          c.channel.call<ProcessReport>('metrics', null).catch(() => undefined),
          late,
        ]);
        clearTimeout(timer);
        if (report) this.reports.update(c.proc.pid!, report);
      }),
    );
    return this.reports.sum(own);
  }

  /** Process ids of the fetch processes that are up (tests, status). */
  pids(): number[] {
    return this.children.filter((c): c is Child => c?.ready === true).map((c) => c.proc.pid!);
  }

  /**
   * Takes over the 'connection' event of `server`: each new connection goes
   * in turn to this process (the server's own listeners) or to a fetch
   * process that is up. The server must not read a connection before this
   * decides (pauseOnConnect).
   */
  takeConnections(server: Server): void {
    const own = server.listeners('connection') as Array<(socket: Socket) => void>;
    server.removeAllListeners('connection');
    (server as Server & { pauseOnConnect: boolean }).pauseOnConnect = true;
    server.on('connection', (socket: Socket) => {
      const up = this.children.filter((c): c is Child => c?.ready === true && c.channel.connected);
      const slot = this.turn++ % (up.length + 1);
      if (slot > 0 && !this.stopping && !this.d.keepConnections?.()) {
        const child = up[slot - 1]!;
        child.channel.sendSocket(socket, (err) => {
          if (err)
            this.d.logger.warn(`fetch process ${child.index}: a connection could not be handed over (${err.message})`);
        });
        return;
      }
      for (const l of own) l.call(server, socket);
      socket.resume();
    });
  }

  /** An ACME certificate renewed: every fetch process serves it from its next connection on. */
  tlsRenewed(material: TlsMaterial): void {
    for (const c of this.children) c?.channel.note('tls', material);
  }

  /** A configuration read again (SIGHUP): every fetch process applies it as this one did. */
  reloaded(next: ServerConfig): void {
    for (const c of this.children) c?.channel.note('reload', next);
  }

  /**
   * Stops every fetch process: it finishes its requests, sends its last
   * fetch counts and exits (killed after STOP_TIMEOUT_MS). Resolve this
   * before the store closes, so those counts are written.
   */
  async stop(): Promise<void> {
    this.stopping = true;
    clearInterval(this.limitTimer);
    await Promise.all(
      this.children.map(async (c) => {
        if (!c || c.proc.exitCode !== null || c.proc.signalCode !== null) return;
        // 'close', not 'exit': its last log lines may still be in the pipe when it exits.
        const exited = new Promise<void>((done) => c.proc.once('close', () => done()));
        c.channel.note('stop', null);
        const timer = setTimeout(() => c.proc.kill('SIGKILL'), STOP_TIMEOUT_MS);
        await exited;
        clearTimeout(timer);
      }),
    );
  }

  private spawn(index: number): Promise<void> {
    const { logger } = this.d;
    // The same node, flags (the unit's memory settings) and entry script as this process, or the same single executable.
    // With a log file its lines come here, so that one process writes and rotates the file.
    const sink = this.d.logSink;
    const proc = startSelf(['__fetch-process'], {
      serialization: 'advanced',
      stdio: ['ignore', 'inherit', sink ? 'pipe' : 'inherit', 'ipc'],
    });
    if (sink) pipeWholeLines(proc.stderr!, sink);
    const channel = new Channel(
      proc,
      this.handlers(index),
      logger,
      () => new StoreUnavailableError('the fetch process is gone'),
    );
    // By pid: a report that arrives after its process ended is not taken for its successor's.
    channel.handle('metrics', (report: ProcessReport) => this.reports.update(proc.pid!, report));
    const child: Child = { index, proc, channel, ready: false, startedAt: Date.now() };
    this.children[index] = child;
    const ready = this.startedOrGone(child);
    let detach = () => {};
    proc.once('exit', (code, signal) => {
      child.ready = false;
      this.reports.retire(proc.pid!);
      child.channel.close();
      detach();
      if (this.stopping) return;
      // A process that lived a while gets a quick restart; one that keeps dying, a slower one each time.
      const delay = Date.now() - child.startedAt > 60_000 ? 1000 : this.restartDelay[index]!;
      this.restartDelay[index] = Math.min(delay * 2, 30_000);
      logger.error(
        `fetch process ${index + 1} (pid ${proc.pid}) ended (${signal ?? `exit ${code}`}); this process serves every connection until it is started again in ${delay / 1000} s`,
      );
      setTimeout(() => {
        if (!this.stopping) void this.spawn(index);
      }, delay).unref();
    });
    const material = this.d.tls?.();
    const init: FetchProcessInit = {
      index: index + 1,
      config: this.d.config,
      timeouts: this.d.timeouts,
      ...(material ? { tls: material } : {}),
    };
    proc.send({ k: 'note', m: 'init', p: init });
    // Its copy of the live shares; it says 'ready' once the snapshot is in.
    void this.feed.attach(channel).then(
      (d) => {
        detach = d;
        if (proc.exitCode !== null || proc.signalCode !== null) d();
      },
      (err: unknown) =>
        logger.error(`fetch process ${index + 1}: the copy of the shares could not be sent: ${String(err)}`),
    );
    return ready;
  }

  /** Resolves when `child` says 'ready' (marked up), exits, or is killed for not starting within START_TIMEOUT_MS. */
  private startedOrGone(child: Child): Promise<void> {
    const { logger } = this.d;
    const { index, proc, channel } = child;
    return new Promise<void>((done) => {
      const timer = setTimeout(() => {
        logger.error(`fetch process ${index + 1} did not start within ${START_TIMEOUT_MS / 1000} s; stopping it`);
        proc.kill('SIGKILL');
        done();
      }, START_TIMEOUT_MS);
      channel.handle('ready', () => {
        clearTimeout(timer);
        child.ready = true;
        logger.info(`fetch process ${index + 1} started (pid ${proc.pid})`);
        done();
      });
      proc.once('exit', () => {
        clearTimeout(timer);
        done();
      });
    });
  }

  private handlers(index: number): Handlers {
    const { service, backend, limiter, config } = this.d;
    return {
      fetch: ({ code, client }: ForwardedFetchCall) => {
        if (client === undefined) return service.fetchForProcess(code);
        // The tokens the fetch process took for this address, first: the miss is judged on them all.
        if (client.taken > 0) {
          limiter.debit(client.key, client.taken);
          this.syncLimits(index, [[client.key, client.taken]]);
        }
        try {
          return service.fetchForProcess(code);
        } catch (err) {
          settleForwardedMiss(limiter, config, client.key, err);
          throw err;
        }
      },
      counts: (items: Array<[string, number]>) =>
        items.map(([code, n]) => [code, service.countForwarded(code, n) ?? null]),
      publish: (p: { publicKey: Uint8Array; email: string; clientKey: string }) =>
        backend.publish(p.publicKey, p.email, p.clientKey),
      verificationInfo: (token: string) => backend.verificationInfo(token),
      confirm: (token: string) => backend.confirm(token),
      statusReport: () => backend.statusReport(),
      metricsText: () => this.d.metricsText(),
      replicate: (p: { headers: Record<string, string | string[] | undefined>; body: Uint8Array; nowMs: number }) =>
        backend.replicate(p.headers, p.body, p.nowMs),
      unpublish: (p: { req: UnpublishRequest; clientKey: string }) => backend.unpublish(p.req, p.clientKey),
      requestManageLink: (p: { email: string; clientKey: string }) => backend.requestManageLink(p.email, p.clientKey),
      manageView: (token: string) => backend.manageView(token),
      manageDelete: (p: { token: string; code: string | undefined; clientKey: string }) =>
        backend.manageDelete(p.token, p.code, p.clientKey),
      limits: (taken: Array<[string, number]>) => {
        for (const [key, n] of taken) limiter.debit(key, n);
        this.syncLimits(index, taken);
      },
    };
  }

  /** Tells every fetch process (but `from`) of request tokens taken elsewhere. */
  private syncLimits(from: number | undefined, taken: Array<[string, number]>): void {
    if (taken.length === 0) return;
    for (const c of this.children) if (c && c.index !== from && c.ready) c.channel.note('limits', taken);
  }
}
