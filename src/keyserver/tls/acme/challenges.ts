/**
 * The TLS-ALPN-01 side of the port (RFC 8737): while an ACME order waits for
 * validation, the CA connects to port 443 of the name, offers only the
 * `acme-tls/1` protocol and expects a self-signed certificate carrying the
 * key authorization. The port guard (../port-guard.ts) hands such
 * connections here; this completes that one handshake and closes.
 *
 * Only a ClientHello offering exactly `acme-tls/1` for a pending name is
 * taken, so clients keep getting the real certificate during a renewal.
 */
import type { Socket } from 'node:net';
import { createSecureContext, TLSSocket, type SecureContext } from 'node:tls';
import type { ClientHelloInfo } from '../client-hello.js';
import type { AlpnChallengeResponder } from '../port-guard.js';

export const ACME_TLS_ALPN = 'acme-tls/1';
/** A validation connection gets this long to finish its handshake. */
const VALIDATION_MS = 10_000;

export class AlpnChallenges implements AlpnChallengeResponder {
  private readonly byName = new Map<string, SecureContext>();
  /** Validation connections answered (tests, logs). */
  answered = 0;

  /** Serves `cert`/`key` (PEM, from acme-client's createAlpnCertificate) to validations of `name` until removed. */
  add(name: string, cert: string | Buffer, key: string | Buffer): void {
    this.byName.set(name.toLowerCase(), createSecureContext({ cert, key, minVersion: 'TLSv1.2' }));
  }

  remove(name: string): void {
    this.byName.delete(name.toLowerCase());
  }

  pending(): boolean {
    return this.byName.size > 0;
  }

  take(socket: Socket, hello: ClientHelloInfo): boolean {
    if (hello.alpn.length !== 1 || hello.alpn[0] !== ACME_TLS_ALPN || hello.servername === undefined) return false;
    const context = this.byName.get(hello.servername);
    if (!context) return false;
    const tls = new TLSSocket(socket, { isServer: true, secureContext: context, ALPNProtocols: [ACME_TLS_ALPN] });
    const timer = setTimeout(() => tls.destroy(), VALIDATION_MS);
    timer.unref();
    tls.once('secure', () => {
      this.answered++;
      // The CA has what it came for; RFC 8737 asks for nothing more on this connection.
      tls.end();
    });
    tls.on('error', () => tls.destroy());
    tls.once('close', () => clearTimeout(timer));
    // Nothing is ever read from a validation connection but the handshake.
    tls.resume();
    return true;
  }
}
