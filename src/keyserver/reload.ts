/**
 * Applying a configuration read again while the server runs (SIGHUP,
 * `systemctl reload`; docs/operations.md, "Reloading the configuration").
 *
 * What can change live is copied into the one ServiceConfig object every
 * request reads (service, routes, the fetch fast path), and into the parts
 * that keep their own copy (limiters, store, TLS context). Nothing is
 * restarted: the listening socket, open connections, requests in flight and
 * the replication queues stay as they are. Node runs one request handler at
 * a time, so a request sees either the old configuration or the new one.
 *
 * What cannot change live (the address and port, the state folder, the
 * server and cluster ids, the replication token and peers, the mail command,
 * ...) is reported in the log and kept until a restart.
 */
import { errorMessage } from '../errors.js';
import { readTls } from './tls-files.js';
import { certificateProblems } from './tls/certificate-check.js';
import { profileOptions } from './tls/profile.js';
import type { Server } from 'node:http';
import type { Server as HttpsServer } from 'node:https';
import type { ServerConfig, ServiceConfig } from './server-config.js';
import type { RequestLimiter } from './limits/token-bucket.js';
import type { WindowLimiter } from './limits/window-limiter.js';
import type { Logger } from './logger.js';
import type { ShareStore } from './store/share-store.js';

/** The parts of a running server a reload reaches. */
export interface Reloadable {
  config: ServiceConfig;
  limiters: { requests: RequestLimiter; emails: WindowLimiter; emailIps: WindowLimiter };
  /** Absent in a fetch process (multi/fetch-process.ts): the store is the store's process's. */
  store?: ShareStore;
  server: Server;
  logger: Logger;
}

export interface ReloadResult {
  /** Config keys whose new value is in use now. */
  applied: string[];
  /** Config keys that changed but keep their old value until a restart. */
  needRestart: string[];
}

/** Keys that change live, by config-file name, with how to show a value. */
const LIVE: Array<[key: keyof ServerConfig, name: string]> = [
  ['topologyVersion', 'topology_version'],
  ['topologyServers', 'topology_server'],
  ['routes', 'route'],
  ['promotedOwners', 'promoted_owner'],
  ['publicUrl', 'public_url'],
  ['rateLimitPerMinute', 'rate_limit_per_minute'],
  ['rateLimitBurst', 'rate_limit_burst'],
  ['verificationEmailRateLimitPerHour', 'verification_email_rate_limit_per_hour'],
  ['verificationEmailIpRateLimitPerHour', 'verification_email_ip_rate_limit_per_hour'],
  ['shareTtlSeconds', 'share_ttl'],
  ['trustProxy', 'trust_proxy'],
  ['compactMinBytes', 'compact_min_bytes'],
];

/** Keys kept until a restart; `secret` values are never shown. */
const AT_RESTART: Array<[key: keyof ServerConfig, name: string, secret?: true]> = [
  ['bind', 'bind_addr'],
  ['stateDir', 'state_dir'],
  ['developer', 'developer'],
  ['serverId', 'server_id'],
  ['clusterId', 'cluster_id'],
  ['originEpoch', 'origin_epoch'],
  ['replicationToken', 'replication_token', true],
  ['replicationPeerUrls', 'replication_peer_url'],
  ['verificationEmailCommand', 'verification_email_command'],
  ['tlsCert', 'tls_cert'],
  ['tlsKey', 'tls_key'],
  ['acmeDomains', 'acme_domain'],
  ['acmeEmail', 'acme_email'],
  ['acmeDirectory', 'acme_directory'],
  ['processes', 'processes'],
  ['diskCapBytes', 'disk_cap_bytes'],
  ['logFile', 'log_file'],
  ['metricsBind', 'metrics_bind'],
];

const same = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b);
const show = (v: unknown) => (v === undefined ? '(unset)' : typeof v === 'string' ? v : JSON.stringify(v));

/**
 * Applies `next` (a freshly parsed configuration) to the running server,
 * whose config holds what it settled on at start (public URL resolved,
 * origin epoch fixed): an unset public_url or origin_epoch in `next` keeps
 * those values.
 */
export async function applyReload(r: Reloadable, next: ServerConfig): Promise<ReloadResult> {
  const c = r.config;
  const applied: string[] = [];
  const needRestart: string[] = [];
  const changes: string[] = [];

  for (const [key, name, secret] of AT_RESTART) {
    if (key === 'originEpoch' && next.originEpoch === undefined) continue;
    if (same(c[key], next[key])) continue;
    needRestart.push(name);
    r.logger.warn(
      secret
        ? `reload: ${name} changed; it takes effect only at a restart (the running value is kept)`
        : `reload: ${name} changed (${show(c[key])} -> ${show(next[key])}); it takes effect only at a restart, keeping ${show(c[key])}`,
    );
  }

  const update: Partial<ServiceConfig> = {};
  for (const [key, name] of LIVE) {
    if (key === 'publicUrl' && next.publicUrl === undefined) continue;
    if (same(c[key], next[key])) continue;
    (update as Record<string, unknown>)[key] = next[key];
    applied.push(name);
    changes.push(`${name} ${show(c[key])} -> ${show(next[key])}`);
  }
  Object.assign(c, update);
  r.limiters.requests.configure(c.rateLimitPerMinute, c.rateLimitBurst);
  r.limiters.emails.configure(c.verificationEmailRateLimitPerHour);
  r.limiters.emailIps.configure(c.verificationEmailIpRateLimitPerHour);
  r.store?.setCompactMinBytes(c.compactMinBytes);

  // Certificates are read again on every reload (a renewed certificate keeps its file names).
  if (
    c.tlsCert !== undefined &&
    c.tlsKey !== undefined &&
    'setSecureContext' in r.server &&
    !needRestart.includes('tls_cert') &&
    !needRestart.includes('tls_key')
  ) {
    try {
      // The same checks as at start: a renewed file that is not PEM, or a key of another certificate, is named.
      const { cert, key } = await readTls(c.tlsCert, c.tlsKey);
      // The whole profile again: setSecureContext replaces the context, settings and all.
      (r.server as unknown as HttpsServer).setSecureContext(profileOptions({ cert, key }));
      applied.push('tls_cert');
      changes.push('TLS certificate and key read again');
      for (const p of certificateProblems(cert, `--tls-cert ${c.tlsCert}`, c.publicUrl, Date.now()))
        r.logger.warn(`reload: ${p}`);
    } catch (err) {
      r.logger.error(
        `reload: the TLS certificate or key cannot be used (${errorMessage(err)}); keeping the one in use`,
      );
    }
  }
  r.logger.info(
    `reload: configuration loaded; ${changes.length > 0 ? `applied ${changes.join(', ')}` : 'nothing to change'}`,
  );
  return { applied, needRestart };
}
