/**
 * The one place where failures become HTTP responses. A StashError with a
 * known code gets its status from httpStatusByCode and its own message;
 * client errors raised by Koa or the router (4xx with expose) keep their
 * status; anything else is a 500 with a generic message, logged with its
 * stack here and never shown to the caller.
 */
import type { Context, Middleware } from 'koa';
import { StashError } from '../../errors.js';
import { httpStatusByCode, RateLimitedError } from '../errors.js';
import type { Logger } from '../logger.js';
import { failureAnswer, sendAnswer, type HttpFailure } from './answers.js';

const codeByStatus: Record<number, string> = {
  400: 'MALFORMED_REQUEST',
  404: 'ROUTE_NOT_FOUND',
  405: 'METHOD_NOT_ALLOWED',
  408: 'REQUEST_TIMEOUT',
  413: 'PAYLOAD_TOO_LARGE',
  415: 'UNSUPPORTED_MEDIA_TYPE',
};

/** Maps any thrown value to what the caller may see. */
export function classify(err: unknown, logger: Logger): HttpFailure {
  if (err instanceof StashError && err.expose && httpStatusByCode[err.code] !== undefined && err.code !== 'INTERNAL') {
    // A full store frees room as shares expire (15 minutes by default): a minute is a fair first wait.
    const retryAfter =
      err instanceof RateLimitedError
        ? err.retryAfter
        : err.code === 'STORE_UNAVAILABLE'
          ? 5
          : err.code === 'STORE_FULL'
            ? 60
            : 0;
    if (err.code === 'STORE_UNAVAILABLE')
      logger.error(`http: ${err.message}${err.cause instanceof Error ? ` (${err.cause.message})` : ''}`);
    return {
      status: httpStatusByCode[err.code]!,
      code: err.code,
      message: err.message,
      retryAfter,
      limit: err instanceof RateLimitedError ? err.limit : undefined,
      headers: {},
    };
  }
  const e = err as { status?: unknown; expose?: unknown; message?: unknown; headers?: unknown };
  if (
    !(err instanceof StashError) &&
    typeof e.status === 'number' &&
    e.status >= 400 &&
    e.status < 500 &&
    e.expose === true
  ) {
    const headers = typeof e.headers === 'object' && e.headers !== null ? (e.headers as Record<string, string>) : {};
    return {
      status: e.status,
      code: codeByStatus[e.status] ?? 'MALFORMED_REQUEST',
      message: String(e.message),
      retryAfter: 0,
      limit: undefined,
      headers,
    };
  }
  if (!(err instanceof StashError) && e.status === 501) {
    // The router's "not implemented" for methods it has never heard of: still the caller's mistake.
    return {
      status: 405,
      code: 'METHOD_NOT_ALLOWED',
      message: 'this method is not supported here',
      retryAfter: 0,
      limit: undefined,
      headers: {},
    };
  }
  logger.error(`http: internal error: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
  return {
    status: 500,
    code: 'INTERNAL',
    message: 'internal server error',
    retryAfter: 0,
    limit: undefined,
    headers: {},
  };
}

/** Writes a failure in the encoding the caller asked for (HTML on /verify). */
export function writeFailure(ctx: Context, f: HttpFailure): void {
  sendAnswer(ctx, failureAnswer(f, ctx.path, ctx.method, ctx.req.headers));
}

/** `observe` sees every failure answered (the metrics count 429s by limit). */
export function errorMiddleware(logger: Logger, observe?: (f: HttpFailure) => void): Middleware {
  return async (ctx, next) => {
    try {
      await next();
      if (ctx.body === undefined || ctx.body === null) {
        if (ctx.status === 404)
          throw new StashError('ROUTE_NOT_FOUND', `no such endpoint: ${ctx.method} ${ctx.path.slice(0, 100)}`);
        // The router's answers to a wrong method (405, with Allow) or an unknown one (501).
        if (ctx.status === 405 || ctx.status === 501)
          throw new StashError('METHOD_NOT_ALLOWED', `${ctx.method.slice(0, 20)} is not allowed here`);
      }
    } catch (err) {
      const f = classify(err, logger);
      observe?.(f);
      writeFailure(ctx, f);
    }
  };
}
