/**
 * Errors of the key server and of its client. Each carries a stable `code`;
 * the server maps codes to HTTP statuses in one place (http/error-middleware.ts)
 * and the client maps response codes back to these classes (client.ts).
 */
import { StashError } from '../errors.js';

/** Every stable code of the key server's public API, with its HTTP status. */
export const httpStatusByCode: Readonly<Record<string, number>> = {
  MALFORMED_REQUEST: 400,
  INVALID_PUBLIC_KEY: 400,
  INVALID_EMAIL: 400,
  CODE_TYPO: 400,
  SHARE_NOT_FOUND: 404,
  TOKEN_INVALID: 404,
  ROUTE_NOT_FOUND: 404,
  METHOD_NOT_ALLOWED: 405,
  REQUEST_TIMEOUT: 408,
  SHARE_PENDING: 409,
  SHARE_EXPIRED: 410,
  PAYLOAD_TOO_LARGE: 413,
  UNSUPPORTED_MEDIA_TYPE: 415,
  RATE_LIMITED: 429,
  REPLICATION_UNAUTHORIZED: 401,
  REPLICATION_STALE: 401,
  REPLICATION_FORBIDDEN: 403,
  REPLICATION_REPLAY: 409,
  UNPUBLISH_STALE: 401,
  UNPUBLISH_FORBIDDEN: 403,
  SHARE_NOT_SERVED_HERE: 421,
  INTERNAL: 500,
  OWNER_UNREACHABLE: 502,
  STORE_UNAVAILABLE: 503,
  STORE_FULL: 507,
  METRICS_FORBIDDEN: 403,
};

/** A failure of the key server or of a request to it. */
export class KeyServerError extends StashError {}

/** The request body or a field in it cannot be used (HTTP 400). */
export class MalformedRequestError extends KeyServerError {
  constructor(message: string, code = 'MALFORMED_REQUEST') {
    super(code, message);
  }
}

/** A share code whose check symbol does not match: the user mistyped it. */
export class CodeTypoError extends KeyServerError {
  constructor(message = 'this share code has a typo: check it and type it again') {
    super('CODE_TYPO', message);
  }
}

/** Which limit a 429 is about; named in the message and in the JSON body. */
export type LimitName = 'requests-per-ip' | 'emails-per-address' | 'emails-per-ip' | 'unpublishes-per-ip';

/** A rate limit was reached; `retryAfter` is in whole seconds (>= 1). */
export class RateLimitedError extends KeyServerError {
  readonly retryAfter: number;
  readonly limit: LimitName | undefined;
  constructor(message: string, retryAfter: number, limit?: LimitName) {
    super('RATE_LIMITED', message);
    this.retryAfter = Math.max(1, Math.ceil(retryAfter));
    this.limit = limit;
  }
}

/** The store could not make a record durable; the request was not applied. */
export class StoreUnavailableError extends KeyServerError {
  constructor(message = 'the share store is temporarily unavailable; try again later', cause?: unknown) {
    super('STORE_UNAVAILABLE', message, cause === undefined ? undefined : { cause });
  }
}

/**
 * A write would take the store past its share of the disk cap
 * (--disk-cap-bytes; disk/budget.ts): refused before anything is written,
 * so nothing acknowledged is touched. Answered 507 Insufficient Storage.
 */
export class StoreFullError extends KeyServerError {
  /** `detail` says which limit, in bytes (no share, address or token). */
  constructor(detail: string) {
    super(
      'STORE_FULL',
      `this server's store is full (${detail}); nothing was stored; try again later, once shares have expired`,
    );
  }
}

/** The client could not reach the server (refused, reset, timed out, DNS). */
export class ServerUnreachableError extends KeyServerError {
  constructor(message: string, cause?: unknown) {
    super('SERVER_UNREACHABLE', message, cause === undefined ? undefined : { cause });
  }
}

/** The server's TLS certificate did not verify. */
export class ServerUntrustedError extends KeyServerError {
  constructor(message: string, cause?: unknown) {
    super('SERVER_UNTRUSTED', message, cause === undefined ? undefined : { cause });
  }
}

/** The server answered something the client cannot decode. */
export class ServerProtocolError extends KeyServerError {
  constructor(message: string) {
    super('SERVER_PROTOCOL', message);
  }
}
