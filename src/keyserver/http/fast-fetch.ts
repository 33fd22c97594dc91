/**
 * A fast path for share fetches in front of the Koa app. Koa with its router
 * costs about half of a bare node:http server's throughput before the key
 * server does any work of its own (docs/benchmarks.md), so the hot request,
 * POST /v1/share with a well-formed fetch body, is answered here; so are a
 * well-formed publish this server answers itself and POST /verify/<token>
 * (fast-writes.ts), given `writes`.
 *
 * It takes only what it can answer exactly as the app would: the exact path,
 * one of the two media types spelled exactly, a declared Content-Length within
 * the limit, no mark of another server's forwarding, and a body that decodes
 * as a fetch of a share this server answers itself (not one it forwards:
 * forward.ts). Everything else, including a body it has read but will not
 * answer (a publish, garbage, a body that timed out or was cut off), goes to
 * the Koa app, with the body (or the read error) handed over so the app's
 * readBody returns it. The rules themselves (request
 * limit, fetch, answers, errors) live once, in share-fetch.ts, answers.ts and
 * error-middleware.ts, and both paths call them.
 *
 * One difference in timing, none in answers: the app takes the request token
 * before the body arrives, the fast path once it has (the same token, the same
 * count, a Retry-After computed a body's arrival later).
 */
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import type { ServerConfig } from '../server-config.js';
import type { Logger } from '../logger.js';
import type { RequestLimiter } from '../limits/token-bucket.js';
import { BINARY_MEDIA_TYPE, JSON_MEDIA_TYPE } from '../wire/messages.js';
import { failureAnswer, writeAnswer, writeFetched, type Answer, type HttpFailure } from './answers.js';
import type { FrontFetch, FrontRequest } from './fetch-front.js';
import { handOverBody, readBodyThen } from './body.js';
import { requestOf, usualFetchCode } from './fetch-body.js';
import { clientAddress } from './client-address.js';
import { classify } from './error-middleware.js';
import { responseEncoding } from './negotiate.js';
import { checkRequestRate, fetchedType, type FetchBackend } from './share-fetch.js';
import { FORWARDED_BY_HEADER } from '../forward.js';
import type { KeyServerBackend } from '../backend.js';
import { answerConfirm, createdAnswer, verifyToken } from './fast-writes.js';

export interface FastFetchDeps {
  backend: FetchBackend;
  limiter: RequestLimiter;
  config: Pick<ServerConfig, 'rateLimitPerMinute' | 'rateLimitBurst' | 'trustProxy'>;
  logger: Logger;
  bodyLimit: number;
  bodyTimeoutMs: number;
  /** Sees every failure answered here, as errorMiddleware's observer does. */
  onFailure?: (f: HttpFailure) => void;
  /** True for a fetch this server passes on to the owner's servers (forward.ts): the app answers it. */
  forwards?: (code: string) => boolean;
  /** Publishes (when `publishesHere()`: the app would not forward them) and confirmations answered here too. */
  writes?: { backend: KeyServerBackend; publishesHere: () => boolean };
}

type Handler = (req: IncomingMessage, res: ServerResponse) => void;

const EMPTY = Buffer.alloc(0);

/**
 * Wraps the Koa app's callback with the fetch fast path; `front` answers the
 * same fetches for the front on the raw connection (fetch-front.ts).
 */
export function withFastFetch(app: Handler, deps: FastFetchDeps): { handler: Handler; front: FrontFetch } {
  const { backend, limiter, config, logger, bodyLimit, bodyTimeoutMs, onFailure, forwards, writes } = deps;

  const failure = (path: string, headers: IncomingHttpHeaders, err: unknown): Answer => {
    const f = classify(err, logger);
    onFailure?.(f);
    return failureAnswer(f, path, 'POST', headers);
  };
  const failed = (req: IncomingMessage, res: ServerResponse, err: unknown): void =>
    writeAnswer(res, failure(req.url ?? '/v1/share', req.headers, err));

  /** The caller's key for the limits, after the request limit's check (as the app's first middleware does). */
  const checkedClient = (req: IncomingMessage): string => {
    const key = clientAddress(req, config.trustProxy).key;
    if (limiter.enabled) checkRequestRate(limiter, config, key);
    return key;
  };

  const publish = (
    req: IncomingMessage,
    res: ServerResponse,
    w: NonNullable<typeof writes>,
    publicKey: Uint8Array,
    email: string,
  ): void => {
    let key;
    try {
      key = checkedClient(req);
    } catch (err) {
      failed(req, res, err);
      return;
    }
    w.backend.publish(publicKey, email, key).then(
      (created) => writeAnswer(res, createdAnswer(req, created)),
      (err: unknown) => failed(req, res, err),
    );
  };

  const confirm = (
    req: IncomingMessage,
    res: ServerResponse,
    w: NonNullable<typeof writes>,
    token: string,
    error: Error | undefined,
  ): void => {
    if (error !== undefined) {
      handOverBody(req, { error });
      app(req, res);
      return;
    }
    try {
      checkedClient(req);
    } catch (err) {
      failed(req, res, err);
      return;
    }
    answerConfirm(w.backend, token, res, (err) => failed(req, res, err));
  };

  /** A fetch's answer: `ok` with the fetched type and body (at once, or later from another process), or `fail`. */
  const runFetch = (
    req: FrontRequest,
    code: string,
    ok: (type: string, body: string) => void,
    fail: (err: unknown) => void,
  ): void => {
    const encoding = responseEncoding(req.headers, 'POST');
    let body;
    try {
      const key = limiter.enabled ? clientAddress(req, config.trustProxy).key : '';
      if (limiter.enabled) checkRequestRate(limiter, config, key);
      body = backend.fetchBody(code, encoding, limiter.enabled ? { limiter, key } : undefined);
    } catch (err) {
      fail(err);
      return;
    }
    const type = fetchedType(encoding);
    if (typeof body === 'string') ok(type, body);
    else body.then((b) => ok(type, b), fail);
  };

  const answer = (req: IncomingMessage, res: ServerResponse, code: string): void =>
    runFetch(
      req,
      code,
      (type, body) => writeFetched(res, type, body),
      (err) => failed(req, res, err),
    );

  const withBody = (
    req: IncomingMessage,
    res: ServerResponse,
    json: boolean,
    error: Error | undefined,
    body: Buffer | undefined,
  ): void => {
    const usual = error === undefined && !json ? usualFetchCode(body!, 0, body!.length) : undefined;
    const request = error === undefined && usual === undefined ? requestOf(body!, json) : undefined;
    const code = usual ?? (request?.op === 'fetch' ? request.code : undefined);
    if (code !== undefined && forwards?.(code) !== true) {
      answer(req, res, code);
      return;
    }
    if (request?.op === 'create' && writes !== undefined && writes.publishesHere()) {
      publish(req, res, writes, request.publicKey, request.email);
      return;
    }
    handOverBody(req, error === undefined ? { body: body! } : { error });
    app(req, res);
  };

  /**
   * After the parser has read what arrived with the headers: a small body
   * sent with them (the usual case) is complete and waits in the request's
   * buffer, and is taken in one read() with no listener, timer or stream
   * event; one still on its way is read with the body deadline.
   */
  const afterHeaders = (req: IncomingMessage, res: ServerResponse, json: boolean): void => {
    if (req.destroyed) return; // the client went away: nobody to answer
    if (req.complete) {
      withBody(req, res, json, undefined, (req.read() as Buffer | null) ?? EMPTY);
      return;
    }
    readBodyThen(req, bodyLimit, bodyTimeoutMs, (error, body) => withBody(req, res, json, error, body));
  };

  /** The same for a confirmation, whose body is read and dropped (the form sends nothing the app uses). */
  const afterConfirmHeaders = (req: IncomingMessage, res: ServerResponse, token: string): void => {
    if (req.destroyed) return;
    if (req.complete) {
      req.read();
      confirm(req, res, writes!, token, undefined);
      return;
    }
    readBodyThen(req, bodyLimit, bodyTimeoutMs, (error) => confirm(req, res, writes!, token, error));
  };

  const handler: Handler = (req, res) => {
    if (req.method !== 'POST') return app(req, res);
    if (req.url !== '/v1/share') {
      const token = writes === undefined ? undefined : verifyToken(req.url);
      // The confirmation form sends an empty body, with or without a Content-Length.
      const declared = req.headers['content-length'];
      const plainBody =
        declared === undefined ? req.headers['transfer-encoding'] === undefined : Number(declared) <= bodyLimit;
      if (token === undefined || !plainBody) return app(req, res);
      setImmediate(afterConfirmHeaders, req, res, token);
      return;
    }
    // Another server forwarded it: the app checks its signature and answers it from this server's store.
    if (req.headers[FORWARDED_BY_HEADER] !== undefined) return app(req, res);
    const type = req.headers['content-type'];
    const json = type === JSON_MEDIA_TYPE;
    if (!json && type !== BINARY_MEDIA_TYPE) return app(req, res);
    const declared = req.headers['content-length'];
    if (declared === undefined || !(Number(declared) <= bodyLimit)) return app(req, res);
    // This runs while node:http parses the packet: the body that came with the headers is parsed
    // by the time the event loop reaches its check phase (not yet at the next tick).
    setImmediate(afterHeaders, req, res, json);
  };

  /** The same fetches for the front on the raw connection (fetch-front.ts): it has checked the request's form. */
  const front: FrontFetch = (req, code, fetched, fail) => {
    if (forwards?.(code) === true) return false;
    runFetch(req, code, fetched, (err) => fail(failure('/v1/share', req.headers, err)));
    return true;
  };
  return { handler, front };
}
