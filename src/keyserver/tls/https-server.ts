/**
 * The HTTPS server of a key server process (the store's process and each
 * fetch process alike): node's https.Server with the TLS profile
 * (profile.ts), the port guard in front of TLS (port-guard.ts), the
 * handshake bound by the headers deadline, and HSTS on every answer.
 */
import { ServerResponse, type IncomingMessage, type ServerOptions as HttpServerOptions } from 'node:http';
import { createServer, type Server } from 'node:https';
import { guardTlsPort, type AlpnChallengeResponder } from './port-guard.js';
import { HSTS_HEADER, HSTS_VALUE, profileOptions, type TlsMaterial } from './profile.js';

/**
 * Adds HSTS as the header block is written, so that no answer goes without
 * it: not Koa's own error answer (which removes every header set before
 * it). It comes last, after Content-Length; the front on the raw connection
 * (http/fetch-front.ts) writes it in the same place.
 */
class HstsResponse<Request extends IncomingMessage = IncomingMessage> extends ServerResponse<Request> {
  // biome-ignore lint/suspicious/noExplicitAny: ServerResponse.writeHead's overloads take no single tuple type to forward.
  override writeHead(...args: any[]): this {
    if (!this.headersSent) this.setHeader(HSTS_HEADER, HSTS_VALUE);
    return (ServerResponse.prototype.writeHead as (...a: unknown[]) => this).apply(this, args);
  }
}

export interface HttpsOptions {
  /** The certificate to serve; undefined until ACME has one (handshakes fail meanwhile). */
  material: TlsMaterial | undefined;
  /** The headers deadline: a connection that has not finished its handshake by then is closed. */
  deadlineMs: number;
  challenges?: AlpnChallengeResponder;
}

/** An HTTPS server over `handler` with the options of node:http (timeouts, limits) in `http`. */
export function createHttpsServer(
  http: HttpServerOptions,
  tls: HttpsOptions,
  handler: (req: IncomingMessage, res: ServerResponse) => void,
): Server {
  const server = createServer(
    {
      ...http,
      ...profileOptions(tls.material),
      handshakeTimeout: tls.deadlineMs,
      ServerResponse: HstsResponse,
    },
    handler,
  );
  const guard = guardTlsPort(server, {
    deadlineMs: tls.deadlineMs,
    ...(tls.challenges ? { challenges: tls.challenges } : {}),
  });
  // Shutdown closes idle connections first: those still silent before TLS are idle too.
  const closeIdle = server.closeIdleConnections.bind(server);
  server.closeIdleConnections = () => {
    guard.closeWaiting();
    closeIdle();
  };
  return server;
}
