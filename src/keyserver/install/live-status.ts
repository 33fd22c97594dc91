/**
 * The `server:` line of `stash_key_server status`: asks the running server,
 * on loopback at the port of its config, for its own /v1/status and reports
 * when its configuration was loaded (start or last reload) and what its
 * store's start-up check skipped. Loopback gets the full status
 * (http/status-access.ts); nothing is sent but the GET. Over HTTPS, the
 * `certificate:` line describes the certificate that handshake presented:
 * what clients get, whether it came from --tls-cert or from ACME.
 */
import { X509Certificate } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import type { TLSSocket } from 'node:tls';
import type { ServerConfig } from '../server-config.js';
import { acmeStatusLine } from '../tls/acme/status-line.js';
import { certificateFacts, certificateProblems, describeCertificate } from '../tls/certificate-check.js';

const TIMEOUT_MS = 2000;

type LiveConfig = Pick<
  ServerConfig,
  'bind' | 'tlsCert' | 'tlsKey' | 'publicUrl' | 'acmeDomains' | 'acmeDirectory' | 'stateDir'
>;

/** Where the server of `c` answers on this host. */
function localUrl(c: LiveConfig): string {
  const scheme = (c.tlsCert !== undefined && c.tlsKey !== undefined) || c.acmeDomains.length > 0 ? 'https' : 'http';
  const host = c.bind.host === '0.0.0.0' ? '127.0.0.1' : c.bind.host === '::' ? '::1' : c.bind.host;
  return `${scheme}://${host.includes(':') ? `[${host}]` : host}:${c.bind.port}/v1/status`;
}

interface LiveAnswer {
  status: Record<string, unknown>;
  /** The certificate the server presented (HTTPS only). */
  certificate: X509Certificate | undefined;
}

function getJson(url: string): Promise<LiveAnswer> {
  return new Promise((resolve, reject) => {
    const https = url.startsWith('https:');
    // Our own server on this host, read only: its certificate names the public host, not the loopback address.
    const options = {
      headers: { Accept: 'application/json' },
      timeout: TIMEOUT_MS,
      ...(https ? { rejectUnauthorized: false } : {}),
    };
    const req = (https ? httpsRequest : httpRequest)(url, options, (res) => {
      let body = '';
      const raw = https ? (res.socket as TLSSocket).getPeerCertificate().raw : undefined;
      const certificate = raw ? new X509Certificate(raw) : undefined;
      res.setEncoding('utf8');
      res.on('data', (d: string) => {
        body += d;
        if (body.length > 65_536) req.destroy(new Error('answer too large'));
      });
      res.on('end', () => {
        try {
          if (res.statusCode !== 200) throw new Error(`HTTP ${res.statusCode}`);
          resolve({ status: JSON.parse(body) as Record<string, unknown>, certificate });
        } catch (err) {
          reject(err instanceof SyntaxError ? new Error('not a key server status') : err);
        }
      });
    });
    req.on('timeout', () => req.destroy(new Error(`no answer within ${TIMEOUT_MS / 1000} s`)));
    req.on('error', reject);
    req.end();
  });
}

/**
 * The `server:` line (whether the server answers, when its configuration
 * was loaded, what recovery skipped) and, over HTTPS, a `certificate:` line:
 * the names and expiry of the certificate it serves, and what is wrong with it;
 * with ACME, an `acme:` line on the last order (acme/status-line.ts).
 */
export async function liveServerLines(c: LiveConfig): Promise<string[]> {
  const acme = await acmeStatusLine(c);
  return [...(await answerLines(c)), ...(acme ? [acme] : [])];
}

async function answerLines(c: LiveConfig): Promise<string[]> {
  const url = localUrl(c);
  let answer: LiveAnswer;
  try {
    answer = await getJson(url);
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    const lines = [`server: not answering at ${url} (${e.code ?? e.message})`];
    // The file it would serve, then: an expired certificate may be why it does not answer.
    if (c.tlsCert !== undefined) lines.push(await certificateFileLine(c.tlsCert, c.publicUrl));
    return lines;
  }
  const s = answer.status;
  const lines = [serverLine(url, s)];
  if (answer.certificate) lines.push(certificateLine(answer.certificate, c.publicUrl));
  return lines;
}

function serverLine(url: string, s: Record<string, unknown>): string {
  if (typeof s.config_loaded_at !== 'number')
    return `server: answering at ${url} (an older server, or not all of its status shown)`;
  const parts = [`server: answering at ${url}, configuration loaded ${new Date(s.config_loaded_at).toISOString()}`];
  if (typeof s.config_reload_error === 'string') parts.push(`LAST RELOAD FAILED: ${s.config_reload_error}`);
  const ranges = Number(s.store_skipped_ranges ?? 0);
  if (ranges > 0)
    parts.push(
      `store: ${ranges} damaged range(s), ${Number(s.store_skipped_bytes)} bytes skipped at start (copy: ${String(s.store_damaged_copy)})`,
    );
  return parts.join('; ');
}

/** `certificate: names ...; valid until ...; issuer ...[; WARNING: ...]` for the certificate a server presents. */
export function certificateLine(cert: X509Certificate, publicUrl: string | undefined): string {
  const now = Date.now();
  const parts = [`certificate: ${describeCertificate(certificateFacts(cert), now)}`];
  // Without a public URL there is no name to check: the loopback address asked here is not what clients use.
  const problems = certificateProblems(
    cert.toString(),
    'this server',
    publicUrl ?? `https://${certificateFacts(cert).names[0] ?? 'localhost'}`,
    now,
  );
  for (const p of problems) parts.push(`WARNING: ${p}`);
  return parts.join('; ');
}

async function certificateFileLine(path: string, publicUrl: string | undefined): Promise<string> {
  try {
    return certificateLine(new X509Certificate(await readFile(path)), publicUrl).replace(
      'certificate: ',
      `certificate: (${path}, not served now) `,
    );
  } catch (err) {
    return `certificate: ${path} cannot be read as a PEM certificate (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`;
  }
}
