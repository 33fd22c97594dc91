/**
 * What is wrong with a certificate a server is about to serve, said before a
 * client finds out: expired (or not valid yet), expiring within 14 days, or
 * not naming the host of --public-url. A server still starts with such a
 * certificate (an operator may be mid-renewal, or a proxy may present
 * another one), but says so in its log, at every reload and in `status`.
 */
import { X509Certificate } from 'node:crypto';
import { isIP } from 'node:net';

/** Warn when a certificate has less than this left. */
export const EXPIRY_WARNING_DAYS = 14;
const DAY_MS = 86_400_000;

export interface CertificateFacts {
  /** The DNS names and IP addresses the certificate is for (subjectAltName; the CN when it has none). */
  names: string[];
  notBefore: number;
  notAfter: number;
  issuer: string;
}

/** The facts of the first certificate of a PEM chain. */
export function certificateFacts(chain: Buffer | string | X509Certificate): CertificateFacts {
  const x = chain instanceof X509Certificate ? chain : new X509Certificate(chain);
  return {
    names: namesOf(x),
    notBefore: Date.parse(x.validFrom),
    notAfter: Date.parse(x.validTo),
    issuer: oneLine(x.issuer),
  };
}

function oneLine(dn: string): string {
  return dn.split('\n').filter(Boolean).join(', ');
}

function namesOf(x: X509Certificate): string[] {
  const san = x.subjectAltName;
  if (san) {
    return san.split(', ').map((entry) => {
      const colon = entry.indexOf(':');
      return colon < 0 ? entry : entry.slice(colon + 1);
    });
  }
  const cn = /(?:^|\n)CN=([^\n]*)/.exec(x.subject)?.[1];
  return cn ? [cn] : [];
}

/** The host of a public URL as a certificate would name it (no brackets around IPv6). */
export function publicHost(publicUrl: string): string {
  return new URL(publicUrl).hostname.replace(/^\[(.*)\]$/, '$1');
}

/** "names a, b; valid until <ISO time> (in N days)": the `status` line's words. */
export function describeCertificate(f: CertificateFacts, nowMs: number): string {
  const left = f.notAfter - nowMs;
  const when =
    left < 0
      ? `EXPIRED ${new Date(f.notAfter).toISOString()}`
      : `valid until ${new Date(f.notAfter).toISOString()} (${daysText(left)} left)`;
  return `names ${f.names.join(', ') || '(none)'}; ${when}; issuer ${f.issuer}`;
}

function daysText(ms: number): string {
  const days = Math.floor(ms / DAY_MS);
  if (days >= 1) return `${days} day${days === 1 ? '' : 's'}`;
  const hours = Math.floor(ms / 3_600_000);
  return hours >= 1 ? `${hours} hour${hours === 1 ? '' : 's'}` : `${Math.max(0, Math.floor(ms / 1000))} s`;
}

/**
 * The problems of `chain` for a server whose public URL is `publicUrl`, one
 * sentence each naming `source` (e.g. "--tls-cert /etc/stash/tls/fullchain.pem");
 * empty when there are none. `expiringSoon: false` leaves out the 14-day
 * warning (a certificate the server renews itself).
 */
export function certificateProblems(
  chain: Buffer | string,
  source: string,
  publicUrl: string,
  nowMs: number,
  opts: { expiringSoon?: boolean } = {},
): string[] {
  const x = new X509Certificate(chain);
  const f = certificateFacts(x);
  const problems: string[] = [];
  const until = new Date(f.notAfter).toISOString();
  if (f.notAfter <= nowMs) {
    problems.push(
      `the certificate of ${source} expired at ${until}: clients refuse it; renew it (then systemctl reload)`,
    );
  } else if (f.notBefore > nowMs) {
    problems.push(
      `the certificate of ${source} is not valid before ${new Date(f.notBefore).toISOString()}: clients refuse it until then (is this machine's clock right?)`,
    );
  } else if (opts.expiringSoon !== false && f.notAfter - nowMs < EXPIRY_WARNING_DAYS * DAY_MS) {
    problems.push(
      `the certificate of ${source} expires at ${until} (${daysText(f.notAfter - nowMs)} left, under ${EXPIRY_WARNING_DAYS} days): renew it (then systemctl reload)`,
    );
  }
  const host = publicHost(publicUrl);
  const covered = isIP(host) ? x.checkIP(host) !== undefined : x.checkHost(host) !== undefined;
  if (!covered) {
    problems.push(
      `the certificate of ${source} does not name ${host}, the host of the public URL ${publicUrl} (it names ${f.names.join(', ') || 'nothing'}): clients refuse it`,
    );
  }
  return problems;
}
