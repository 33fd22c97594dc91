/**
 * A fast path for share fetches in front of the Koa app. Koa with its router
 * costs about half of a bare node:http server's throughput before the key
 * server does any work of its own (docs/benchmarks.md), so the one hot
 * request, POST /v1/share with a well-formed fetch body, is answered here.
 *
 * It takes only what it can answer exactly as the app would: the exact path,
 * one of the two media types spelled exactly, a declared Content-Length within
 * the limit, and a body that decodes as a fetch. Everything else, including a
 * body it has read but will not answer (a publish, garbage, a body that timed
 * out or was cut off), goes to the Koa app, with the body (or the read error)
 * handed over so the app's readBody returns it. The rules themselves (request
 * limit, fetch, answers, errors) live once, in share-fetch.ts, answers.ts and
 * error-middleware.ts, and both paths call them.
 *
 * One difference in timing, none in answers: the app takes the request token
 * before the body arrives, the fast path once it has (the same token, the same
 * count, a Retry-After computed a body's arrival later).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { ServerConfig } from '../cli/options.js';
import { MalformedRequestError } from '../errors.js';
import type { Logger } from '../logger.js';
import type { RequestLimiter } from '../limits/token-bucket.js';
import type { ShareService } from '../service.js';
import type { FetchedCache } from '../wire/fetched-cache.js';
import { decodeJsonShareRequest } from '../wire/json.js';
import { BINARY_MEDIA_TYPE, JSON_MEDIA_TYPE, MessageType, WIRE_VERSION, decodeShareRequest, type ShareRequest } from '../wire/messages.js';
import { failureAnswer, writeAnswer } from './answers.js';
import { handOverBody, readBodyThen } from './body.js';
import { clientAddress } from './client-address.js';
import { classify } from './error-middleware.js';
import { checkRequestRate, fetchAnswer } from './share-fetch.js';

export interface FastFetchDeps {
  service: ShareService;
  cache: FetchedCache;
  limiter: RequestLimiter;
  config: Pick<ServerConfig, 'rateLimitPerMinute' | 'rateLimitBurst' | 'trustProxy'>;
  logger: Logger;
  bodyLimit: number;
  bodyTimeoutMs: number;
}

type Handler = (req: IncomingMessage, res: ServerResponse) => void;

const fail = (message: string) => new MalformedRequestError(message);

/** The fetch code of a body, or undefined when the body is anything but a well-formed fetch. */
function fetchCodeOf(body: Buffer, json: boolean): string | undefined {
  let req: ShareRequest;
  try {
    if (json) req = decodeJsonShareRequest(body, fail);
    else if (body[0] !== WIRE_VERSION || body[1] !== MessageType.fetchRequest) return undefined;
    else req = decodeShareRequest(body, fail);
  } catch {
    return undefined;
  }
  return req.op === 'fetch' ? req.code : undefined;
}

/** Wraps the Koa app's callback with the fetch fast path. */
export function withFastFetch(app: Handler, deps: FastFetchDeps): Handler {
  const { service, cache, limiter, config, logger, bodyLimit, bodyTimeoutMs } = deps;

  const answer = (req: IncomingMessage, res: ServerResponse, code: string): void => {
    let a;
    try {
      const key = limiter.enabled ? clientAddress(req, config.trustProxy).key : '';
      if (limiter.enabled) checkRequestRate(limiter, config, key);
      a = fetchAnswer(service, cache, code, req.headers, limiter.enabled ? { limiter, key } : undefined);
    } catch (err) {
      a = failureAnswer(classify(err, logger), '/v1/share', 'POST', req.headers);
    }
    writeAnswer(res, a);
  };

  return (req, res) => {
    if (req.method !== 'POST' || req.url !== '/v1/share') return app(req, res);
    const type = req.headers['content-type'];
    const json = type === JSON_MEDIA_TYPE;
    if (!json && type !== BINARY_MEDIA_TYPE) return app(req, res);
    const declared = req.headers['content-length'];
    if (declared === undefined || !(Number(declared) <= bodyLimit)) return app(req, res);
    readBodyThen(req, bodyLimit, bodyTimeoutMs, (error, body) => {
      const code = error === undefined ? fetchCodeOf(body!, json) : undefined;
      if (code !== undefined) {
        answer(req, res, code);
        return;
      }
      handOverBody(req, error === undefined ? { body: body! } : { error });
      app(req, res);
    });
  };
}
