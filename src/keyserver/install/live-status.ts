/**
 * The `server:` line of `stash_key_server status`: asks the running server,
 * on loopback at the port of its config, for its own /v1/status and reports
 * when its configuration was loaded (start or last reload) and what its
 * store's start-up check skipped. Loopback gets the full status
 * (http/status-access.ts); nothing is sent but the GET.
 */
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import type { ServerConfig } from '../cli/options.js';

const TIMEOUT_MS = 2000;

/** Where the server of `c` answers on this host. */
function localUrl(c: Pick<ServerConfig, 'bind' | 'tlsCert' | 'tlsKey'>): string {
  const scheme = c.tlsCert !== undefined && c.tlsKey !== undefined ? 'https' : 'http';
  const host = c.bind.host === '0.0.0.0' ? '127.0.0.1' : c.bind.host === '::' ? '::1' : c.bind.host;
  return `${scheme}://${host.includes(':') ? `[${host}]` : host}:${c.bind.port}/v1/status`;
}

function getJson(url: string): Promise<Record<string, unknown>> {
  return new Promise((resolve, reject) => {
    const https = url.startsWith('https:');
    // Our own server on this host, read only: its certificate names the public host, not the loopback address.
    const options = { headers: { Accept: 'application/json' }, timeout: TIMEOUT_MS, ...(https ? { rejectUnauthorized: false } : {}) };
    const req = (https ? httpsRequest : httpRequest)(url, options, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => {
        body += d;
        if (body.length > 65_536) req.destroy(new Error('answer too large'));
      });
      res.on('end', () => {
        try {
          if (res.statusCode !== 200) throw new Error(`HTTP ${res.statusCode}`);
          resolve(JSON.parse(body) as Record<string, unknown>);
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

/** One line saying whether the server answers, when its configuration was loaded and what recovery skipped. */
export async function liveServerLine(c: Pick<ServerConfig, 'bind' | 'tlsCert' | 'tlsKey'>): Promise<string> {
  const url = localUrl(c);
  let s: Record<string, unknown>;
  try {
    s = await getJson(url);
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    return `server: not answering at ${url} (${e.code ?? e.message})`;
  }
  if (typeof s.config_loaded_at !== 'number') return `server: answering at ${url} (an older server, or not all of its status shown)`;
  const parts = [`server: answering at ${url}, configuration loaded ${new Date(s.config_loaded_at).toISOString()}`];
  if (typeof s.config_reload_error === 'string') parts.push(`LAST RELOAD FAILED: ${s.config_reload_error}`);
  const ranges = Number(s.store_skipped_ranges ?? 0);
  if (ranges > 0) parts.push(`store: ${ranges} damaged range(s), ${Number(s.store_skipped_bytes)} bytes skipped at start (copy: ${String(s.store_damaged_copy)})`);
  return parts.join('; ');
}
