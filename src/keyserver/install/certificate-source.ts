/**
 * Where the installed service gets its certificate: `install` needs one of
 * the two, from its flags or from the config it keeps.
 *
 * - ACME (`--acme-domain NAME`, `--acme-email`, `--acme-directory`): the
 *   service obtains and renews it itself, state in its own state folder.
 * - Files (`--tls-cert PATH --tls-key PATH`): the key may stay root-only;
 *   systemd hands both files to the service (LoadCredential=, as for the
 *   replication token): the DynamicUser could not read a root-only key.
 * - A kept config with `trust_proxy = true` and neither: TLS ends at a
 *   reverse proxy in front (docs/key-server.md, "TLS and proxies").
 */
import { resolve } from 'node:path';
import { UsageError } from '../../errors.js';
import type { ServerConfig } from '../server-config.js';
import { parseCommandLine } from '../cli/parse.js';
import { readTls } from '../tls-files.js';

export type CertificateSource =
  | { kind: 'acme'; domains: string[]; email: string | undefined; directory: string | undefined }
  | { kind: 'files'; cert: string; key: string }
  | { kind: 'proxy' };

/** The source named by flags or config values, if any. */
export function sourceOf(
  c: Pick<ServerConfig, 'acmeDomains' | 'acmeEmail' | 'acmeDirectory' | 'tlsCert' | 'tlsKey' | 'trustProxy'>,
): CertificateSource | undefined {
  if (c.acmeDomains.length > 0)
    return { kind: 'acme', domains: c.acmeDomains, email: c.acmeEmail, directory: c.acmeDirectory };
  if (c.tlsCert !== undefined && c.tlsKey !== undefined) return { kind: 'files', cert: c.tlsCert, key: c.tlsKey };
  return c.trustProxy ? { kind: 'proxy' } : undefined;
}

export const NEEDS_SOURCE =
  'install needs the certificate the service will serve on port 443: ' +
  "--acme-domain NAME [--acme-email ADDR] to obtain it from Let's Encrypt (the names must point at this machine, port 443 open), " +
  'or --tls-cert PATH --tls-key PATH for files you renew yourself; or set acme_domain, or tls_cert and tls_key, in /etc/stash/key-server.toml';

/**
 * The source `install` uses: its flags (which the config it writes will
 * hold), else the config it keeps (`existing`, its text). Files are checked
 * now, as root, so a typo is named before anything is written.
 */
export async function installSource(
  flags: ServerConfig,
  existing: { path: string; text: string } | undefined,
): Promise<CertificateSource> {
  const given = absolute(sourceOf(flags));
  let kept: CertificateSource | undefined;
  if (existing && !flags.forceConfig) {
    const inv = parseCommandLine(['run', '--config', existing.path], () => existing.text);
    if (inv.command === 'run') kept = absolute(sourceOf(inv.config));
    // Running install again with the same flags is fine; other ones would leave the kept config saying something else.
    if (given && JSON.stringify(given) !== JSON.stringify(kept)) {
      throw new UsageError(
        `${existing.path} exists and is kept, with ${kept ? `another certificate (${kept.kind})` : 'no certificate'}: give --force-config to rewrite it with these options, or set them in it and run install without them`,
      );
    }
  }
  const source = given ?? kept;
  if (!source) throw new UsageError(NEEDS_SOURCE);
  if (source.kind === 'files') {
    for (const [flag, path] of [
      ['--tls-cert', source.cert],
      ['--tls-key', source.key],
    ] as const) {
      if (/\s/.test(path))
        throw new UsageError(
          `${flag} ${path}: the unit cannot name a path with white space (LoadCredential=); move the file`,
        );
    }
    // The service reads the files through systemd, but only if they are there and usable: a typo is caught here.
    await readTls(source.cert, source.key);
  }
  return source;
}

/** LoadCredential= takes an absolute path: relative file names are the caller's working folder's. */
function absolute(s: CertificateSource | undefined): CertificateSource | undefined {
  return s?.kind === 'files' ? { kind: 'files', cert: resolve(s.cert), key: resolve(s.key) } : s;
}

/** One line for install's output. */
export function describeSource(s: CertificateSource): string {
  switch (s.kind) {
    case 'acme':
      return `certificate: over ACME for ${s.domains.join(', ')} (TLS-ALPN-01 on port 443; obtained at the first start, renewed by the service)`;
    case 'files':
      return `certificate: ${s.cert} and its key ${s.key}, handed to the service by systemd (LoadCredential=); after renewing them: systemctl restart stash-key-server`;
    case 'proxy':
      return 'certificate: none here (trust_proxy: TLS ends at the reverse proxy in front)';
  }
}
