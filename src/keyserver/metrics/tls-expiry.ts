/**
 * The expiry of the certificate the server serves, for
 * stash_keyserver_tls_certificate_expiry_timestamp_seconds. Whatever loads a
 * certificate into the server (tls-files.ts at start and on reload today,
 * certificate renewal later) calls set() with the PEM chain it installed;
 * the first certificate of the chain is the one clients check.
 */
import { X509Certificate } from 'node:crypto';

export class ServedCertificate {
  /** notAfter of the served certificate, seconds since the epoch; undefined without TLS. */
  expiresAt: number | undefined;

  set(certPem: Buffer | string): void {
    const ms = Date.parse(new X509Certificate(certPem).validTo);
    this.expiresAt = Number.isFinite(ms) ? ms / 1000 : undefined;
  }
}
