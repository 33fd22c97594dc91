/**
 * The rules of a share fetch that the Koa route and the front on the raw
 * connection (fetch-front.ts) both follow, kept here once: the per-address
 * request limit and the fetched answer in the encoding the caller asked for.
 * These are the only two paths a fetch takes.
 */
import type { IncomingHttpHeaders } from 'node:http';
import type { ServerConfig } from '../server-config.js';
import { errorCode } from '../../errors.js';
import { RateLimitedError } from '../errors.js';
import type { RequestLimiter } from '../limits/token-bucket.js';
import type { FetchedEncoding } from '../wire/fetched-cache.js';
import { BINARY_MEDIA_TYPE } from '../wire/messages.js';
import type { Logger } from '../logger.js';
import { JSON_CONTENT_TYPE, failureAnswer, type Answer, type HttpFailure } from './answers.js';
import { clientAddress } from './client-address.js';
import { classify } from './error-middleware.js';
import type { FrontFetch } from './fetch-front.js';
import { responseEncoding } from './negotiate.js';

/** Takes one request token for `clientKey`; throws RATE_LIMITED (429 with Retry-After) when none is left. */
export function checkRequestRate(limiter: RequestLimiter, config: RateConfig, clientKey: string): void {
  const decision = limiter.take(clientKey);
  if (!decision.ok) throw requestRateError(config, decision.retryAfter);
}

type RateConfig = Pick<ServerConfig, 'rateLimitPerMinute' | 'rateLimitBurst'>;

function requestRateError(config: RateConfig, retryAfter: number): RateLimitedError {
  return new RateLimitedError(
    `too many requests from your address (limit: ${config.rateLimitPerMinute} per minute, burst ${config.rateLimitBurst}); try again in ${retryAfter} seconds`,
    retryAfter,
    'requests-per-ip',
  );
}

/**
 * Request tokens a fetch costs in all when it hands out no share (a miss):
 * the code is pending verification, unknown or expired. A guesser, or
 * someone polling a pending code they came across, gets a fifth of a
 * fetcher's rate (24 a minute, 8 in a burst, with the defaults).
 * docs/http-api.md, "Rate limits".
 */
export const MISS_TOKENS = 5;
const MISSES = new Set(['SHARE_PENDING', 'SHARE_NOT_FOUND', 'SHARE_EXPIRED']);

/** Whether `err` is a fetch's miss. */
const isMiss = (err: unknown): boolean => MISSES.has(errorCode(err) ?? '');

/** Who a fetch is charged to: the client's address and the request limiter of the process it reached. */
export interface FetchClient {
  limiter: RequestLimiter;
  key: string;
}

/** Where fetches are answered: this process's service, or a fetch process's copy (multi/remote-backend.ts). */
export interface FetchBackend {
  /**
   * ShareService.fetchBody: the body, one character per byte; throws (or,
   * answered elsewhere, rejects with) the service's errors. A miss is charged
   * to `client` (MISS_TOKENS in all, with the token the request took) by the
   * process that finds it a miss: chargingMisses here, settleForwardedMiss in
   * the store's process for a fetch process.
   */
  fetchBody(rawCode: string, encoding: FetchedEncoding, client?: FetchClient): string | Promise<string>;
}

/**
 * Runs a fetch this process answers itself; a miss takes MISS_TOKENS - 1
 * more tokens from `client` (into debt if need be) before its error goes on.
 * Synchronous, so no other request of the client is let in between the
 * token it took and the charge.
 */
export function chargingMisses(fetch: () => string, client: FetchClient | undefined): string {
  try {
    return fetch();
  } catch (err) {
    if (client && isMiss(err)) client.limiter.charge(client.key, MISS_TOKENS - 1);
    throw err;
  }
}

/**
 * A fetch this server passed on to the owner's servers (forward.ts): their
 * miss is charged here, to the client, as chargingMisses charges one (the
 * owner's server does not charge a signed forwarded request).
 */
export async function chargingForwardedMisses<T>(fetch: Promise<T>, client: FetchClient): Promise<T> {
  try {
    return await fetch;
  } catch (err) {
    if (isMiss(err)) client.limiter.charge(client.key, MISS_TOKENS - 1);
    throw err;
  }
}

/**
 * The store's process, for a fetch a fetch process asked of it that turned
 * out a miss (`err`), after the tokens that process took for `key` were
 * handed over with the call (debit): the store's process decides every miss
 * against its own bucket, so misses through all processes are counted in one
 * place, in order. When that bucket does not cover the tokens taken (the
 * fetch process let the request in on a count that had not yet heard of
 * other misses), the answer is 429 instead of the miss; otherwise the miss
 * is charged as chargingMisses does. Any other error is left alone.
 */
export function settleForwardedMiss(limiter: RequestLimiter, config: RateConfig, key: string, err: unknown): void {
  if (!isMiss(err)) return;
  const covered = limiter.covered(key);
  if (!covered.ok) throw requestRateError(config, covered.retryAfter);
  limiter.charge(key, MISS_TOKENS - 1);
}

/** The content type of a fetched answer in `encoding`. */
export const fetchedType = (encoding: FetchedEncoding): string =>
  encoding === 'json' ? JSON_CONTENT_TYPE : BINARY_MEDIA_TYPE;

/** A fetch as an Answer (the Koa route). */
export async function fetchAnswer(
  backend: FetchBackend,
  code: string,
  headers: IncomingHttpHeaders,
  client?: FetchClient,
): Promise<Answer> {
  const encoding = responseEncoding(headers, 'POST');
  const body = await backend.fetchBody(code, encoding, client);
  return { status: 200, headers: [], type: fetchedType(encoding), body: Buffer.from(body, 'latin1') };
}

export interface FrontFetchDeps {
  backend: FetchBackend;
  limiter: RequestLimiter;
  config: Pick<ServerConfig, 'rateLimitPerMinute' | 'rateLimitBurst' | 'trustProxy'>;
  logger: Logger;
  /** Sees every failure answered on the front, as errorMiddleware's observer does. */
  onFailure?: (f: HttpFailure) => void;
  /** True for a fetch this server passes on to the owner's servers (forward.ts): Koa answers it. */
  forwards: (code: string) => boolean;
}

/**
 * The fetches the front on the raw connection answers (fetch-front.ts), by
 * the Koa route's rules: the request token first (as the app's first
 * middleware takes it), the same backend call, failures classified and
 * written as errorMiddleware writes them.
 */
export function frontFetch(deps: FrontFetchDeps): FrontFetch {
  const { backend, limiter, config, logger, onFailure, forwards } = deps;
  return (req, code, fetched, failed) => {
    if (forwards(code)) return false;
    const fail = (err: unknown): void => {
      const f = classify(err, logger);
      onFailure?.(f);
      failed(failureAnswer(f, '/v1/share', 'POST', req.headers));
    };
    const encoding = responseEncoding(req.headers, 'POST');
    let body;
    try {
      const key = limiter.enabled ? clientAddress(req, config.trustProxy).key : '';
      if (limiter.enabled) checkRequestRate(limiter, config, key);
      body = backend.fetchBody(code, encoding, limiter.enabled ? { limiter, key } : undefined);
    } catch (err) {
      fail(err);
      return true;
    }
    const type = fetchedType(encoding);
    if (typeof body === 'string') fetched(type, body);
    else body.then((b) => fetched(type, b), fail);
    return true;
  };
}
