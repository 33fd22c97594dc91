/**
 * The Koa application of the key server: createApp(deps) wires the backend
 * (backend.ts), the limits and the routes. Tests call app.callback() (or listen on port 0);
 * server.ts adds the HTTP(S) server, its timeouts and the process around it.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import Koa from 'koa';
import Router from '@koa/router';
import type { Clock } from './clock.js';
import { KeyServerError, RateLimitedError } from './errors.js';
import { COMMON_HEADERS, HTML_CONTENT_TYPE, JSON_CONTENT_TYPE } from './http/answers.js';
import { readBody } from './http/body.js';
import { clientAddress, type ClientAddress } from './http/client-address.js';
import { errorMiddleware } from './http/error-middleware.js';
import type { FrontFetch } from './http/fetch-front.js';
import { fullStatusAllowed, isLoopback, publicStatus } from './http/status-access.js';
import { responseEncoding, wantsHtml, type Encoding } from './http/negotiate.js';
import { PAGE_CSP, alreadyConfirmedPage, confirmPage, confirmedPage, homePage, invalidLinkPage } from './http/pages.js';
import { manageRoutes } from './http/manage-routes.js';
import { checkRequestRate, frontFetch } from './http/share-fetch.js';
import { sharePost } from './http/share-post.js';
import { Forwarder, claimsSignedForward } from './forward.js';
import type { KeyServerBackend, Limiters } from './backend.js';
import type { Logger } from './logger.js';
import { EXPOSITION_CONTENT_TYPE } from './metrics/exposition.js';
import type { ProcessMetrics } from './metrics/process-metrics.js';
import type { ServiceConfig } from './server-config.js';
import { MAX_REPLICATE_BODY, encodeAck } from './replication/batch.js';
import { statusJson, topologyJson } from './wire/json.js';
import { BINARY_MEDIA_TYPE, encodeStatus, encodeTopology } from './wire/messages.js';

export interface AppDeps {
  /** Where requests are answered: this process's service (localBackend), or the store's process from a fetch process. */
  backend: KeyServerBackend;
  limiters: Limiters;
  clock: Clock;
  config: ServiceConfig;
  logger: Logger;
  /** Body limit in bytes (default 4 KiB) and body deadline (default 10 s). */
  bodyLimit?: number;
  bodyTimeoutMs?: number;
  /** Give `front` for the front on the raw connection (http/fetch-front.ts) (default true; tests compare both paths). */
  fastFetch?: boolean;
  /** This process's counters: `callback` counts every answer, 429s by limit (metrics/process-metrics.ts). */
  metrics?: ProcessMetrics;
}

export interface KeyServerApp {
  app: Koa;
  /** The request handler: app.callback(), with every request counted when AppDeps.metrics is given. */
  callback: (req: IncomingMessage, res: ServerResponse) => void;
  /** The same fetches for the front on the raw connection (http/fetch-front.ts), unless AppDeps.fastFetch is false. */
  front?: FrontFetch;
  limiters: Limiters;
}

interface State {
  client: ClientAddress;
}

function sendMessage(ctx: Koa.Context, encoding: Encoding, binary: () => Buffer, json: () => object): void {
  if (encoding === 'json') {
    ctx.type = JSON_CONTENT_TYPE;
    ctx.body = JSON.stringify(json());
  } else {
    ctx.type = BINARY_MEDIA_TYPE;
    ctx.body = binary();
  }
}

function sendPage(ctx: Koa.Context, status: number, html: string): void {
  ctx.status = status;
  ctx.set('Content-Security-Policy', PAGE_CSP);
  ctx.set('X-Frame-Options', 'DENY');
  ctx.type = HTML_CONTENT_TYPE;
  ctx.body = html;
}

/** Builds the application. */
export function createApp(deps: AppDeps): KeyServerApp {
  const { config, clock, logger, backend, limiters, metrics } = deps;
  const observe = metrics ? (f: Parameters<ProcessMetrics['failed']>[0]) => metrics.failed(f) : undefined;
  const bodyLimit = deps.bodyLimit ?? 4096;
  const bodyTimeoutMs = deps.bodyTimeoutMs ?? 10_000;
  const forwarder = new Forwarder(config, logger);
  const app = new Koa<State>();
  app.on('error', (err: unknown) => logger.error(`http: ${err instanceof Error ? err.message : String(err)}`));

  app.use(errorMiddleware(logger, observe));
  app.use(requestLimit(config, limiters));

  const router = new Router<State>();
  router.post(
    '/v1/share',
    sharePost({ backend, limiters, config, clock, logger, forwarder, bodyLimit, bodyTimeoutMs }),
  );
  infoRoutes(router, backend, config, clock);
  replicateRoute(router, backend, limiters, clock, bodyTimeoutMs);
  pageRoutes(router, backend, bodyLimit, bodyTimeoutMs);
  manageRoutes(router, { backend, bodyLimit, bodyTimeoutMs });

  app.use(router.routes());
  // Not `throw`: the router then sets the Allow header; errorMiddleware turns the empty 405/501 into an error body.
  app.use(router.allowedMethods());
  const koa = app.callback();
  const callback = metrics ? metrics.countRequests(koa) : koa;
  const fast =
    deps.fastFetch === false
      ? undefined
      : frontFetch({
          backend,
          limiter: limiters.requests,
          config,
          logger,
          forwards: (code) => forwarder.forwardsFetch(code),
          ...(observe ? { onFailure: observe } : {}),
        });
  const front = fast && metrics ? metrics.countFront(fast) : fast;
  return { app, callback, limiters, ...(front ? { front } : {}) };
}

/** The middleware after errorMiddleware: common headers, the caller's address, and its request token. */
function requestLimit(config: ServiceConfig, limiters: Limiters): Koa.Middleware<State> {
  return async (ctx, next) => {
    for (const [k, v] of COMMON_HEADERS) ctx.set(k, v);
    ctx.state.client = clientAddress(ctx.req, config.trustProxy);
    // Signed replication traffic is not rate limited per address; refused attempts are (see the route).
    if (ctx.path === '/v1/replicate' && ctx.method === 'POST') return next();
    // Nor is a request another server of the ring forwarded, signed (http/share-post.ts checks it).
    if (ctx.path === '/v1/share' && ctx.method === 'POST' && claimsSignedForward(ctx.req.headers)) return next();
    checkRequestRate(limiters.requests, config, ctx.state.client.key);
    await next();
  };
}

/** GET /v1/topology, /v1/status (public, or full to an allowed caller) and /metrics (loopback only). */
function infoRoutes(router: Router<State>, backend: KeyServerBackend, config: ServiceConfig, clock: Clock): void {
  router.get('/v1/topology', (ctx) => {
    const t = backend.topology();
    sendMessage(
      ctx,
      responseEncoding(ctx.req.headers, 'GET'),
      () => encodeTopology(t),
      () => topologyJson(t),
    );
  });

  router.get('/v1/status', async (ctx) => {
    const full = fullStatusAllowed(ctx.req.headers, ctx.state.client, config, clock.now());
    const r = await backend.statusReport();
    const s = r.status;
    if (!full) {
      const p = publicStatus(s);
      sendMessage(
        ctx,
        responseEncoding(ctx.req.headers, 'GET'),
        () => encodeStatus(p),
        () => p,
      );
      return;
    }
    sendMessage(
      ctx,
      responseEncoding(ctx.req.headers, 'GET'),
      () => encodeStatus(s),
      () => ({ ...statusJson(s), ...r.details, replication_peers: r.peers }),
    );
  });

  // Loopback only on this address (as the full /v1/status): counts and sizes tell when shares come and go.
  // --metrics-bind serves it elsewhere (metrics/metrics-server.ts).
  router.get('/metrics', async (ctx) => {
    if (!isLoopback(ctx.state.client.ip)) {
      throw new KeyServerError(
        'METRICS_FORBIDDEN',
        'GET /metrics is served only to callers on loopback here; the operator can serve it on another address with --metrics-bind',
      );
    }
    const text = await backend.metricsText();
    ctx.set('Content-Type', EXPOSITION_CONTENT_TYPE);
    ctx.body = text;
  });
}

/** POST /v1/replicate: signed batches from peers; only refused attempts count against the caller's address. */
function replicateRoute(
  router: Router<State>,
  backend: KeyServerBackend,
  limiters: Limiters,
  clock: Clock,
  bodyTimeoutMs: number,
): void {
  router.post('/v1/replicate', async (ctx) => {
    const refused = (retryAfter: number) =>
      new RateLimitedError(
        `too many refused replication requests from your address; try again in ${retryAfter} seconds`,
        retryAfter,
        'requests-per-ip',
      );
    // An address whose refused attempts used up its tokens is turned away before its body (up to 1 MiB) is read and checked.
    const early = limiters.requests.check(ctx.state.client.key);
    if (!early.ok) throw refused(early.retryAfter);
    try {
      const body = await readBody(ctx.req, MAX_REPLICATE_BODY, bodyTimeoutMs);
      const ack = await backend.replicate(ctx.req.headers, body, clock.now());
      sendMessage(
        ctx,
        responseEncoding(ctx.req.headers, 'POST'),
        () => encodeAck(ack),
        () => ({ server_id: ack.serverId, applied: ack.applied, unchanged: ack.unchanged }),
      );
    } catch (err) {
      // Only refused attempts count against the caller's address: a guesser is slowed down, a peer is not.
      const decision = limiters.requests.take(ctx.state.client.key);
      if (!decision.ok) throw refused(decision.retryAfter);
      throw err;
    }
  });
}

/** The pages a browser gets: the verification link (GET shows, POST confirms) and the home page. */
function pageRoutes(router: Router<State>, backend: KeyServerBackend, bodyLimit: number, bodyTimeoutMs: number): void {
  router.get('/verify/:token', async (ctx) => {
    const info = await backend.verificationInfo(ctx.params.token ?? '');
    if (!info) sendPage(ctx, 404, invalidLinkPage());
    else sendPage(ctx, 200, info.state === 'pending' ? confirmPage(info) : alreadyConfirmedPage(info));
  });

  router.post('/verify/:token', async (ctx) => {
    await readBody(ctx.req, bodyLimit, bodyTimeoutMs); // the form sends nothing we need
    const done = await backend.confirm(ctx.params.token ?? '');
    if (!done) sendPage(ctx, 404, invalidLinkPage());
    else sendPage(ctx, 200, done.state === 'confirmed-now' ? confirmedPage(done) : alreadyConfirmedPage(done));
  });

  // A browser pointed at the server gets a page saying what it is; API clients keep their 404.
  router.get('/', (ctx) => {
    if (!wantsHtml(ctx.req.headers))
      throw new KeyServerError('ROUTE_NOT_FOUND', 'no such endpoint: GET /; the API is under /v1/');
    sendPage(ctx, 200, homePage());
  });
}
