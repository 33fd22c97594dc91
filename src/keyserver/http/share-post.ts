/**
 * POST /v1/share in the Koa app: create, fetch and unpublish. Each is
 * answered by this server when it serves the share's owner, or passed on to
 * the owner's servers (forward.ts) when it does not; a request another
 * server forwarded is always answered here. The front on the raw
 * connection (fetch-front.ts) leaves to it every request it does not answer
 * itself: the forwarded fetches, those to forward, and all but usual fetches.
 *
 * A forwarded request signed with the replication token was let past the
 * per-address request limit by the app (the server that forwarded it charged
 * its client); its signature is checked here, once the body it covers is
 * read, and a refused one counts against the caller's address, as a refused
 * replication request does.
 */
import type Koa from 'koa';
import { errorCode } from '../../errors.js';
import type { KeyServerBackend, Limiters } from '../backend.js';
import type { Clock } from '../clock.js';
import { MalformedRequestError, RateLimitedError } from '../errors.js';
import { claimsSignedForward, forwardedFrom, type Forwarded, type Forwarder } from '../forward.js';
import type { Logger } from '../logger.js';
import type { ServiceConfig } from '../server-config.js';
import { parseShareCode } from '../share-code.js';
import { decodeJsonShareRequest, shareResponseJson } from '../wire/json.js';
import { BINARY_MEDIA_TYPE, decodeShareRequest, encodeShareResponse, type ShareResponse } from '../wire/messages.js';
import { JSON_CONTENT_TYPE, sendAnswer } from './answers.js';
import { readBody } from './body.js';
import type { ClientAddress } from './client-address.js';
import { requestEncoding, responseEncoding } from './negotiate.js';
import { chargingForwardedMisses, fetchAnswer } from './share-fetch.js';

export interface SharePostDeps {
  backend: KeyServerBackend;
  limiters: Limiters;
  config: ServiceConfig;
  clock: Clock;
  logger: Logger;
  forwarder: Forwarder;
  bodyLimit: number;
  bodyTimeoutMs: number;
}

const fail = (message: string) => new MalformedRequestError(message);

const refused = (retryAfter: number) =>
  new RateLimitedError(
    `too many refused forwarded requests from your address; try again in ${retryAfter} seconds`,
    retryAfter,
    'requests-per-ip',
  );

function send(ctx: Koa.Context, status: number, res: ShareResponse): void {
  ctx.status = status;
  if (responseEncoding(ctx.req.headers, 'POST') === 'json') {
    ctx.type = JSON_CONTENT_TYPE;
    ctx.body = JSON.stringify(shareResponseJson(res));
  } else {
    ctx.type = BINARY_MEDIA_TYPE;
    ctx.body = encodeShareResponse(res);
  }
}

/** The route handler. */
export function sharePost(
  d: SharePostDeps,
): (ctx: Koa.ParameterizedContext<{ client: ClientAddress }>) => Promise<void> {
  const { backend, limiters, forwarder } = d;
  return async (ctx) => {
    const headers = ctx.req.headers;
    const client = ctx.state.client;
    // An address whose refused signatures used up its tokens is turned away before its body is read.
    if (claimsSignedForward(headers)) {
      const early = limiters.requests.check(client.key);
      if (!early.ok) throw refused(early.retryAfter);
    }
    const encoding = requestEncoding(headers);
    const body = await readBody(ctx.req, d.bodyLimit, d.bodyTimeoutMs);
    let forwarded: Forwarded | undefined;
    try {
      forwarded = forwardedFrom(headers, body, d.config, d.clock.now());
    } catch (err) {
      const decision = limiters.requests.take(client.key);
      if (!decision.ok) throw refused(decision.retryAfter);
      throw err;
    }
    const req = encoding === 'binary' ? decodeShareRequest(body, fail) : decodeJsonShareRequest(body, fail);
    // The client the limits count: the forwarding server's word for it when signed, else the caller.
    const clientKey = forwarded?.clientKey ?? client.key;
    const charged = { limiter: limiters.requests, key: client.key };

    if (req.op === 'fetch') {
      const targets = forwarded ? [] : forwarder.targets(parseShareCode(req.code).primary);
      if (targets.length > 0) {
        send(ctx, 200, await chargingForwardedMisses(forwarder.forward(req, targets, clientKey), charged));
        return;
      }
      // A signed forward's miss was charged by the server that forwarded it, to its client.
      sendAnswer(ctx, await fetchAnswer(backend, req.code, headers, forwarded?.signed ? undefined : charged));
      return;
    }

    if (req.op === 'unpublish') {
      const targets = forwarded ? [] : forwarder.targets(parseShareCode(req.code).primary);
      send(
        ctx,
        200,
        targets.length > 0 ? await forwarder.forward(req, targets, clientKey) : await backend.unpublish(req, clientKey),
      );
      return;
    }

    // A create: this server's own codes are served by the route of its own id; when that is another server,
    // the share is created there (with that server's code and link). When none of them answers, here, as before.
    const targets = forwarded ? [] : forwarder.targets(d.config.serverId);
    if (targets.length > 0) {
      try {
        send(ctx, 201, await forwarder.forward(req, targets, clientKey));
        return;
      } catch (err) {
        if (errorCode(err) !== 'OWNER_UNREACHABLE') throw err;
        d.logger.warn(`forward: no server of owner ${d.config.serverId}'s route took a publish; publishing here`);
      }
    }
    send(ctx, 201, await backend.publish(req.publicKey, req.email, clientKey));
  };
}
