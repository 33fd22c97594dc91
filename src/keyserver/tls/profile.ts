/**
 * The TLS settings of every HTTPS listener of the key server, in one place so
 * that a server started with --tls-cert, one reloaded by SIGHUP, a fetch
 * process and an ACME certificate all serve the same: Mozilla's
 * "intermediate" profile (https://wiki.mozilla.org/Security/Server_Side_TLS,
 * version 5.7) less its DHE suites, which is also what Caddy offers.
 *
 * - TLS 1.2 and 1.3 only.
 * - TLS 1.2: ECDHE key exchange (forward secrecy with an RSA certificate too)
 *   and AEAD ciphers only (AES-GCM, ChaCha20-Poly1305): no CBC suite (Lucky13
 *   and its padding-oracle kin), no static RSA key exchange. Finite-field DHE
 *   is left out: clients that lack ECDHE lack TLS 1.2's AEAD suites as well.
 * - The client picks among them (honorCipherOrder off): every suite offered
 *   is strong, and a phone without AES instructions prefers ChaCha20.
 * - Curves X25519, P-256, P-384 (Mozilla's list).
 * - HSTS on every HTTPS answer, two years (Mozilla's value). Not
 *   includeSubDomains: the key server's host says nothing about its siblings.
 */
import type { SecureContextOptions } from 'node:tls';

/** TLS 1.3 suites (all AEAD), in Mozilla's order. */
export const TLS13_SUITES = [
  'TLS_AES_128_GCM_SHA256',
  'TLS_AES_256_GCM_SHA384',
  'TLS_CHACHA20_POLY1305_SHA256',
] as const;

/** TLS 1.2 suites: ECDHE and AEAD only, for ECDSA and RSA certificates. */
export const TLS12_SUITES = [
  'ECDHE-ECDSA-AES128-GCM-SHA256',
  'ECDHE-RSA-AES128-GCM-SHA256',
  'ECDHE-ECDSA-AES256-GCM-SHA384',
  'ECDHE-RSA-AES256-GCM-SHA384',
  'ECDHE-ECDSA-CHACHA20-POLY1305',
  'ECDHE-RSA-CHACHA20-POLY1305',
] as const;

export const ECDH_CURVES = 'X25519:prime256v1:secp384r1';

/** The Strict-Transport-Security header of every HTTPS answer. */
export const HSTS_HEADER = 'Strict-Transport-Security';
export const HSTS_VALUE = 'max-age=63072000';

/** A certificate chain and its private key, PEM. */
export interface TlsMaterial {
  cert: Buffer | string;
  key: Buffer | string;
}

/**
 * The secure-context options of the profile for `material`: what
 * https.createServer, server.setSecureContext and tls.createSecureContext
 * take alike (node's `ciphers` holds the TLS 1.3 suites as well).
 */
export function profileOptions(material?: TlsMaterial): SecureContextOptions {
  return {
    ...(material ? { cert: material.cert, key: material.key } : {}),
    minVersion: 'TLSv1.2',
    maxVersion: 'TLSv1.3',
    ciphers: [...TLS13_SUITES, ...TLS12_SUITES].join(':'),
    ecdhCurve: ECDH_CURVES,
    honorCipherOrder: false,
  };
}
