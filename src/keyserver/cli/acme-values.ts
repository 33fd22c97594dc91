/**
 * Value parsers of the ACME options (--acme-domain, --acme-email,
 * --acme-directory), in the manner of values.ts: each names the option and
 * the rejected value.
 */
import { isIP } from 'node:net';
import { UsageError } from '../../errors.js';

/** Let's Encrypt's production directory: the default of --acme-directory. */
export const LETS_ENCRYPT_DIRECTORY = 'https://acme-v02.api.letsencrypt.org/directory';

const show = (raw: string) => JSON.stringify(raw.length > 80 ? `${raw.slice(0, 80)}...` : raw);

/**
 * A DNS name a public CA can validate over TLS-ALPN-01: letters, digits and
 * hyphens in dot-separated labels, at least two labels, lower-cased. No
 * wildcard (RFC 8737 section 3 allows none with TLS-ALPN-01) and no IP
 * address.
 */
export function parseAcmeDomain(raw: string, where: string): string {
  const name = raw.trim().toLowerCase().replace(/\.$/, '');
  if (name.startsWith('*.'))
    throw new UsageError(`${where} ${show(raw)}: a wildcard name cannot be validated over TLS-ALPN-01; list each name`);
  if (isIP(name) !== 0) throw new UsageError(`${where} ${show(raw)}: give a DNS name, not an IP address`);
  const labels = name.split('.');
  const label = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;
  if (name.length > 253 || labels.length < 2 || !labels.every((l) => label.test(l))) {
    throw new UsageError(
      `${where} must be a DNS name such as keys.example.org (letters, digits, hyphens; an international name in its xn-- form), got ${show(raw)}`,
    );
  }
  return name;
}

/** The contact address of the ACME account (the CA's expiry notices go there). */
export function parseAcmeEmail(raw: string, where: string): string {
  const email = raw.trim();
  const at = email.lastIndexOf('@');
  if (
    email.length > 254 ||
    at <= 0 ||
    at === email.length - 1 ||
    /[\s<>,;:"\\]/.test(email) ||
    email.startsWith('mailto:')
  ) {
    throw new UsageError(`${where} must be an email address such as ops@example.org, got ${show(raw)}`);
  }
  return email;
}

/** The ACME directory URL: https (RFC 8555 section 6.1), no credentials or fragment. */
export function parseAcmeDirectory(raw: string, where: string): string {
  let url: URL;
  try {
    url = new URL(raw.trim());
  } catch {
    throw new UsageError(
      `${where} must be the https:// URL of an ACME directory (default ${LETS_ENCRYPT_DIRECTORY}), got ${show(raw)}`,
    );
  }
  if (url.protocol !== 'https:')
    throw new UsageError(`${where} must be an https:// URL (ACME runs over HTTPS only), got ${show(raw)}`);
  if (url.username || url.password || url.hash)
    throw new UsageError(`${where} must not contain credentials or a fragment, got ${show(raw)}`);
  return url.href;
}
