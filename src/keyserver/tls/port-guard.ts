/**
 * What a TLS port does with a connection before TLS starts: it reads the
 * first bytes itself and only then hands the connection to node's TLS layer.
 *
 * - A TLS client's first byte is 0x16 (a handshake record): handed over,
 *   with the bytes read put back (node's TLSSocket takes what a socket has
 *   buffered). node then bounds the handshake with `handshakeTimeout`.
 * - Plain HTTP (`http://` to the HTTPS port) starts with a method name: it
 *   gets `400` and one line saying to use https://, instead of the empty
 *   reply node gives (it fails the handshake and closes).
 * - Anything else is closed.
 * - A connection that sends nothing is closed at the same deadline as a
 *   handshake: idle sockets cannot pile up for node's 120 s default.
 * - With an ACME TLS-ALPN-01 challenge pending (`challenges`), a
 *   ClientHello that offers only the `acme-tls/1` protocol goes to the
 *   challenge responder instead (RFC 8737): ordinary clients never see a
 *   challenge certificate, even for the name being validated.
 */
import type { Socket } from 'node:net';
import type { Server as TlsServer } from 'node:tls';
import { parseClientHello, type ClientHelloInfo } from './client-hello.js';

/** The first byte of a TLS handshake record. */
const HANDSHAKE = 0x16;
/** How long the 400 answer's connection may linger while the rest of the request is read and dropped. */
const DRAIN_MS = 1000;
/** A ClientHello record is at most 2^14 bytes of payload plus its 5-byte header. */
const MAX_HELLO = 16_384 + 5;

const PLAIN_HTTP_BODY = 'This port speaks HTTPS only: use an https:// URL.\n';
const PLAIN_HTTP_ANSWER = [
  'HTTP/1.1 400 Bad Request',
  'Content-Type: text/plain; charset=utf-8',
  `Content-Length: ${Buffer.byteLength(PLAIN_HTTP_BODY)}`,
  'X-Content-Type-Options: nosniff',
  'Cache-Control: no-store',
  'Connection: close',
  '',
  PLAIN_HTTP_BODY,
].join('\r\n');

/** Answers TLS-ALPN-01 challenges (tls/acme/challenges.ts). */
export interface AlpnChallengeResponder {
  /** Whether any challenge is pending: only then is a whole ClientHello read before handing over. */
  pending(): boolean;
  /** Takes the connection (its ClientHello put back unread) when `hello` is an ACME validation of a pending name; false leaves it to the caller. */
  take(socket: Socket, hello: ClientHelloInfo): boolean;
}

export interface PortGuard {
  /** Closes the connections that have not sent their first bytes yet (server shutdown). */
  closeWaiting(): void;
}

/**
 * Takes over the 'connection' event of `server` (an https.Server): every new
 * connection is checked as above before node's own listener sees it.
 */
export function guardTlsPort(
  server: TlsServer,
  opts: { deadlineMs: number; challenges?: AlpnChallengeResponder },
): PortGuard {
  const tlsListeners = server.listeners('connection') as Array<(socket: Socket) => void>;
  server.removeAllListeners('connection');
  const waiting = new Set<Socket>();

  // The bytes read go back into the socket first: node's TLSSocket starts from what the socket has buffered.
  const putBack = (socket: Socket, read: Buffer) => {
    socket.pause();
    socket.unshift(read);
  };
  const toTls = (socket: Socket) => {
    for (const l of tlsListeners) l.call(server, socket);
  };

  server.on('connection', (socket: Socket) => {
    waiting.add(socket);
    let read: Buffer = Buffer.alloc(0);
    const done = () => {
      clearTimeout(timer);
      waiting.delete(socket);
      socket.off('data', onData);
      socket.off('end', onEnd);
    };
    const timer = setTimeout(() => {
      done();
      socket.destroy();
    }, opts.deadlineMs);
    timer.unref();
    const onEnd = () => {
      done();
      socket.destroy();
    };
    const onData = (chunk: Buffer) => {
      read = read.length === 0 ? chunk : Buffer.concat([read, chunk]);
      const first = read[0]!;
      if (first === HANDSHAKE) {
        if (opts.challenges?.pending()) {
          // The whole first record, to see the ALPN list; a ClientHello normally arrives in one segment.
          const recordEnd = read.length >= 5 ? 5 + read.readUInt16BE(3) : MAX_HELLO;
          if (read.length < Math.min(recordEnd, MAX_HELLO)) return;
          done();
          const hello = parseClientHello(read);
          putBack(socket, read);
          if (!hello || !opts.challenges.take(socket, hello)) toTls(socket);
          return;
        }
        done();
        putBack(socket, read);
        toTls(socket);
      } else if (first >= 0x41 && first <= 0x5a) {
        // An uppercase letter: the start of GET, POST, HEAD, ...
        done();
        answerPlainHttp(socket);
      } else {
        done();
        socket.destroy();
      }
    };
    socket.on('data', onData);
    socket.on('end', onEnd);
    socket.on('error', () => {
      done();
      socket.destroy();
    });
    socket.resume();
  });

  return {
    closeWaiting() {
      for (const s of waiting) s.destroy();
      waiting.clear();
    },
  };
}

/** `400` and one line, then the rest of the request is read and dropped for a moment so that the answer is not lost to a reset. */
function answerPlainHttp(socket: Socket): void {
  socket.end(PLAIN_HTTP_ANSWER);
  socket.on('data', () => {});
  socket.resume();
  const timer = setTimeout(() => socket.destroy(), DRAIN_MS);
  timer.unref();
  socket.once('close', () => clearTimeout(timer));
}
