/**
 * The rules of a share fetch that the Koa route and the fast path
 * (fast-fetch.ts) both follow, kept here once: the per-address request
 * limit and the fetched answer in the encoding the caller asked for.
 */
import type { IncomingHttpHeaders } from 'node:http';
import type { ServerConfig } from '../cli/options.js';
import { errorCode } from '../../errors.js';
import { RateLimitedError } from '../errors.js';
import type { RequestLimiter } from '../limits/token-bucket.js';
import type { FetchedEncoding } from '../wire/fetched-cache.js';
import { BINARY_MEDIA_TYPE } from '../wire/messages.js';
import { JSON_CONTENT_TYPE, type Answer } from './answers.js';
import { responseEncoding } from './negotiate.js';

/** Takes one request token for `clientKey`; throws RATE_LIMITED (429 with Retry-After) when none is left. */
export function checkRequestRate(limiter: RequestLimiter, config: Pick<ServerConfig, 'rateLimitPerMinute' | 'rateLimitBurst'>, clientKey: string): void {
  const decision = limiter.take(clientKey);
  if (!decision.ok) {
    throw new RateLimitedError(
      `too many requests from your address (limit: ${config.rateLimitPerMinute} per minute, burst ${config.rateLimitBurst}); try again in ${decision.retryAfter} seconds`,
      decision.retryAfter,
      'requests-per-ip',
    );
  }
}

/**
 * Request tokens a fetch costs in all when it hands out no share: the code
 * is pending verification, unknown or expired. A guesser, or someone polling
 * a pending code they came across, gets a fifth of a fetcher's rate (24 a
 * minute, 8 in a burst, with the defaults). docs/http-api.md, "Rate limits".
 */
export const MISS_TOKENS = 5;
const MISSES = new Set(['SHARE_PENDING', 'SHARE_NOT_FOUND', 'SHARE_EXPIRED']);

/** Where fetches are answered: this process's service, or a fetch process's cache (multi/remote-backend.ts). */
export interface FetchBackend {
  /** ShareService.fetchBody: the body, one character per byte; throws (or, answered elsewhere, rejects with) the service's errors. */
  fetchBody(rawCode: string, encoding: FetchedEncoding): string | Promise<string>;
}

/**
 * Fetches `code` (counting the fetch) and encodes the answer; throws the
 * service's errors. A miss takes MISS_TOKENS - 1 more tokens from `client`.
 * The body is one character per byte (latin1).
 */
export function fetchBody(
  backend: FetchBackend, code: string, encoding: FetchedEncoding, client?: { limiter: RequestLimiter; key: string },
): string | Promise<string> {
  const charge = (err: unknown): never => {
    if (client && MISSES.has(errorCode(err) ?? '')) client.limiter.charge(client.key, MISS_TOKENS - 1);
    throw err;
  };
  let body;
  try {
    body = backend.fetchBody(code, encoding);
  } catch (err) {
    return charge(err);
  }
  return typeof body === 'string' ? body : body.catch(charge);
}

/** The content type of a fetched answer in `encoding`. */
export const fetchedType = (encoding: FetchedEncoding): string => (encoding === 'json' ? JSON_CONTENT_TYPE : BINARY_MEDIA_TYPE);

/** fetchBody as an Answer (the Koa route). */
export async function fetchAnswer(
  backend: FetchBackend, code: string, headers: IncomingHttpHeaders, client?: { limiter: RequestLimiter; key: string },
): Promise<Answer> {
  const encoding = responseEncoding(headers, 'POST');
  const body = await fetchBody(backend, code, encoding, client);
  return { status: 200, headers: [], type: fetchedType(encoding), body: Buffer.from(body, 'latin1') };
}
