/**
 * The option table of `stash_key_server`: one row per option, shared by the
 * argv parser, the config-file reader and the help text, so the three cannot
 * drift apart. Flags use hyphens, config keys underscores.
 */
import { DEFAULT_DISK_CAP_BYTES, MIN_DISK_CAP_BYTES } from '../disk/budget.js';
import {
  parseBind,
  parseBoolean,
  parseClusterId,
  parseHttpUrl,
  parsePublicUrl,
  parseInteger,
  parseReplicationToken,
  parseRoute,
  parseText,
  parseTopologyServer,
  MAX_SERVER_ID,
} from './values.js';
import { LETS_ENCRYPT_DIRECTORY, parseAcmeDirectory, parseAcmeDomain, parseAcmeEmail } from './acme-values.js';
import type { ServerConfig } from '../server-config.js';

export type Command =
  | 'run'
  | 'install'
  | 'uninstall'
  | 'status'
  | 'resync-peer'
  | 'bench-store'
  | 'bench-http'
  | 'bench-http-fetch'
  | 'bench-http-flow';

export const commandNames: readonly Command[] = [
  'run',
  'install',
  'uninstall',
  'status',
  'resync-peer',
  'bench-store',
  'bench-http',
  'bench-http-fetch',
  'bench-http-flow',
];

export function defaultConfig(): ServerConfig {
  return {
    bind: { host: '127.0.0.1', port: 8089 },
    stateDir: '/var/lib/stash-key-server',
    developer: false,
    serverId: 0,
    clusterId: 'default',
    publicUrl: undefined,
    topologyVersion: 1,
    topologyServers: [],
    routes: [],
    promotedOwners: [],
    replicationToken: undefined,
    replicationTokenFile: undefined,
    replicationPeerUrls: [],
    originEpoch: undefined,
    requests: 50000,
    payloadBytes: 512,
    concurrency: 0,
    preloadShares: 0,
    compactMinBytes: 67108864,
    rateLimitPerMinute: 120,
    rateLimitBurst: 40,
    verificationEmailCommand: undefined,
    verificationEmailRateLimitPerHour: 5,
    verificationEmailIpRateLimitPerHour: 30,
    tlsCert: undefined,
    tlsKey: undefined,
    acmeDomains: [],
    acmeEmail: undefined,
    acmeDirectory: undefined,
    shareTtlSeconds: 900,
    trustProxy: false,
    processes: 1,
    diskCapBytes: DEFAULT_DISK_CAP_BYTES,
    logFile: undefined,
    metricsBind: undefined,
    peerUrl: undefined,
    forceConfig: false,
    purgeData: false,
    json: false,
  };
}

/** Which commands accept an option. */
/** 'certificate': the TLS certificate's source, taken by run-like commands and by install (which writes it into the config). */
type Scope = 'run' | 'resync' | 'install' | 'uninstall' | 'bench' | 'certificate';

export interface OptionDef {
  /** Flag name without the leading `--`. */
  flag: string;
  /** Config-file key, or undefined when the option is command-line only. */
  key: string | undefined;
  /** Placeholder in the help text; undefined for a flag that takes no value. */
  value: string | undefined;
  repeatable: boolean;
  scope: Scope;
  help: string;
  /** Applies one raw value (`where` names its origin for errors). */
  apply(config: ServerConfig, raw: string, where: string): void;
}

const int = (min: number, max?: number) => (raw: string, where: string) => parseInteger(raw, where, min, max);

function opt(
  flag: string,
  value: string | undefined,
  help: string,
  apply: OptionDef['apply'],
  extra: { key?: string | null; repeatable?: boolean; scope?: Scope } = {},
): OptionDef {
  return {
    flag,
    key: extra.key === null ? undefined : (extra.key ?? flag.replace(/-/g, '_')),
    value,
    repeatable: extra.repeatable ?? false,
    scope: extra.scope ?? 'run',
    help,
    apply,
  };
}

/** Replaces an entry with the same id (later sources win) or adds it. */
function upsert<T>(list: T[], item: T, same: (a: T) => boolean): void {
  const i = list.findIndex(same);
  if (i >= 0) list[i] = item;
  else list.push(item);
}

export const optionDefs: readonly OptionDef[] = [
  opt('config', 'PATH', 'read options from a config file first (repeatable; later files win)', () => {}, {
    key: null,
    repeatable: true,
  }),
  opt(
    'bind',
    'ADDR',
    'listen address HOST:PORT (default 127.0.0.1:8089)',
    (c, r, w) => {
      c.bind = parseBind(r, w);
    },
    { key: 'bind_addr' },
  ),
  opt('state-dir', 'PATH', 'share store directory (default /var/lib/stash-key-server)', (c, r, w) => {
    c.stateDir = parseText(r, w);
  }),
  opt(
    'developer',
    undefined,
    'developer mode: state in a fresh temporary directory; verification links printed when no email command is set',
    (c, r, w) => {
      c.developer = parseBoolean(r, w);
    },
  ),
  opt('server-id', 'N', `this server's routing id, 0..${MAX_SERVER_ID} (default 0)`, (c, r, w) => {
    c.serverId = parseInteger(r, w, 0, MAX_SERVER_ID);
  }),
  opt('cluster-id', 'ID', 'public topology cluster id (default "default")', (c, r, w) => {
    c.clusterId = parseClusterId(r, w);
  }),
  opt(
    'public-url',
    'URL',
    'public base URL of this server, with or without /v1/share (default derived from --bind)',
    (c, r, w) => {
      c.publicUrl = parsePublicUrl(r, w);
    },
  ),
  opt('topology-version', 'N', 'public topology version (default 1)', (c, r, w) => {
    c.topologyVersion = int(0, 0xffffffff)(r, w);
  }),
  opt(
    'topology-server',
    'ID=URL[,STATUS]',
    "topology entry: URL is the server's public base URL, with or without /v1/share; STATUS active|standby|promoted|disabled (repeatable)",
    (c, r, w) => {
      const s = parseTopologyServer(r, w);
      upsert(c.topologyServers, s, (x) => x.id === s.id);
    },
    { repeatable: true },
  ),
  opt(
    'route',
    'OWNER=PRIMARY[,FAILOVER...]',
    'routing rule for the shares of OWNER (repeatable)',
    (c, r, w) => {
      const route = parseRoute(r, w);
      upsert(c.routes, route, (x) => x.owner === route.owner);
    },
    { repeatable: true },
  ),
  opt(
    'promoted-owner',
    'N',
    'serve the shares of owner N on this node (failover; repeatable)',
    (c, r, w) => {
      const n = parseInteger(r, w, 0, MAX_SERVER_ID);
      if (!c.promotedOwners.includes(n)) c.promotedOwners.push(n);
    },
    { repeatable: true },
  ),
  opt(
    'replication-token',
    'TOKEN',
    'shared replication secret (HMAC key, at least 16 characters); every local user can read a command line: prefer --replication-token-file',
    (c, r, w) => {
      c.replicationToken = parseReplicationToken(r, w);
    },
  ),
  opt(
    'replication-token-file',
    'PATH',
    'read the replication secret from a file instead (first line; the installed unit uses this)',
    (c, r, w) => {
      c.replicationTokenFile = parseText(r, w);
    },
  ),
  opt(
    'replication-peer-url',
    'URL',
    "a peer's /v1/replicate URL (repeatable)",
    (c, r, w) => {
      const u = parseHttpUrl(r, w);
      if (!c.replicationPeerUrls.includes(u)) c.replicationPeerUrls.push(u);
    },
    { repeatable: true },
  ),
  opt(
    'origin-epoch',
    'N',
    'origin epoch in milliseconds for replication conflicts (default: start time)',
    (c, r, w) => {
      c.originEpoch = int(0)(r, w);
    },
  ),
  opt(
    'requests',
    'N',
    'benchmark request count (default 50000)',
    (c, r, w) => {
      c.requests = int(1)(r, w);
    },
    { key: null, scope: 'bench' },
  ),
  opt(
    'payload-bytes',
    'N',
    'benchmark payload size (default 512)',
    (c, r, w) => {
      c.payloadBytes = int(0, 1 << 20)(r, w);
    },
    { key: null, scope: 'bench' },
  ),
  opt(
    'concurrency',
    'N',
    'benchmark concurrency, 0 = automatic (default 0)',
    (c, r, w) => {
      c.concurrency = int(0, 100000)(r, w);
    },
    { key: null, scope: 'bench' },
  ),
  opt(
    'preload-shares',
    'N',
    'benchmark: live shares created before timing (default 0)',
    (c, r, w) => {
      c.preloadShares = int(0)(r, w);
    },
    { key: null, scope: 'bench' },
  ),
  opt('compact-min-bytes', 'N', 'store size that triggers background compaction (default 67108864)', (c, r, w) => {
    c.compactMinBytes = int(4096)(r, w);
  }),
  opt('rate-limit-per-minute', 'N', 'per-IP requests per minute, 0 disables (default 120)', (c, r, w) => {
    c.rateLimitPerMinute = int(0, 1_000_000)(r, w);
  }),
  opt('rate-limit-burst', 'N', 'per-IP burst capacity (default 40)', (c, r, w) => {
    c.rateLimitBurst = int(1, 1_000_000)(r, w);
  }),
  opt('verification-email-command', 'PATH', 'run as `PATH <email> <url>` to send a verification link', (c, r, w) => {
    c.verificationEmailCommand = parseText(r, w);
  }),
  opt(
    'verification-email-rate-limit-per-hour',
    'N',
    'verification emails per address per hour, 0 disables (default 5)',
    (c, r, w) => {
      c.verificationEmailRateLimitPerHour = int(0, 100000)(r, w);
    },
  ),
  opt(
    'verification-email-ip-rate-limit-per-hour',
    'N',
    'verification emails per source IP per hour, 0 disables (default 30)',
    (c, r, w) => {
      c.verificationEmailIpRateLimitPerHour = int(0, 100000)(r, w);
    },
  ),
  opt(
    'tls-cert',
    'PATH',
    'PEM certificate chain: serve HTTPS directly (needs --tls-key)',
    (c, r, w) => {
      c.tlsCert = parseText(r, w);
    },
    { scope: 'certificate' },
  ),
  opt(
    'tls-key',
    'PATH',
    'PEM private key of --tls-cert',
    (c, r, w) => {
      c.tlsKey = parseText(r, w);
    },
    { scope: 'certificate' },
  ),
  opt(
    'acme-domain',
    'NAME',
    "obtain and renew the certificate for NAME over ACME (TLS-ALPN-01 on this server's own TLS port, 443 for a public CA); instead of --tls-cert (repeatable)",
    (c, r, w) => {
      const name = parseAcmeDomain(r, w);
      if (!c.acmeDomains.includes(name)) c.acmeDomains.push(name);
    },
    { repeatable: true, scope: 'certificate' },
  ),
  opt(
    'acme-email',
    'ADDR',
    "contact address of the ACME account (the CA's notices go there)",
    (c, r, w) => {
      c.acmeEmail = parseAcmeEmail(r, w);
    },
    { scope: 'certificate' },
  ),
  opt(
    'acme-directory',
    'URL',
    `ACME directory URL (default Let's Encrypt, ${LETS_ENCRYPT_DIRECTORY})`,
    (c, r, w) => {
      c.acmeDirectory = parseAcmeDirectory(r, w);
    },
    { scope: 'certificate' },
  ),
  opt('share-ttl', 'SECONDS', 'lifetime of a published share, 60..34560000 (default 900)', (c, r, w) => {
    c.shareTtlSeconds = int(60, 400 * 86400)(r, w);
  }),
  opt(
    'trust-proxy',
    undefined,
    'take the client address from X-Forwarded-For (only behind a proxy you run)',
    (c, r, w) => {
      c.trustProxy = parseBoolean(r, w);
    },
  ),
  opt(
    'processes',
    'N|auto',
    "processes serving requests over the one store: the store's process and N - 1 fetch processes; auto = what fits in 100 MB with 100,000 shares, 1 today (default 1)",
    (c, r, w) => {
      c.processes = r.trim() === 'auto' ? 'auto' : int(1, 64)(r, w);
    },
  ),
  opt(
    'disk-cap-bytes',
    'N',
    `what store, logs and damaged store copies may take on disk together; publishes past the store's share are refused (507) (default ${DEFAULT_DISK_CAP_BYTES})`,
    (c, r, w) => {
      c.diskCapBytes = int(MIN_DISK_CAP_BYTES)(r, w);
    },
  ),
  opt(
    'log-file',
    'PATH',
    'write the log to PATH instead of stderr, rotated at 1/50 of --disk-cap-bytes, 2 older files kept (PATH.1, PATH.2)',
    (c, r, w) => {
      c.logFile = parseText(r, w);
    },
  ),
  opt(
    'metrics-bind',
    'ADDR',
    'also serve GET /metrics on HOST:PORT (plain HTTP, to anyone who reaches it; the main address serves it to loopback only)',
    (c, r, w) => {
      c.metricsBind = parseBind(r, w);
    },
  ),
  opt(
    'peer-url',
    'URL',
    "resync-peer: the peer's /v1/replicate URL (required)",
    (c, r, w) => {
      c.peerUrl = parseHttpUrl(r, w);
    },
    { key: null, scope: 'resync' },
  ),
  opt(
    'force-config',
    undefined,
    'install: rewrite /etc/stash/key-server.toml even if present',
    (c) => {
      c.forceConfig = true;
    },
    { key: null, scope: 'install' },
  ),
  opt(
    'purge-data',
    undefined,
    'uninstall: also remove data, cache, log folders and the config',
    (c) => {
      c.purgeData = true;
    },
    { key: null, scope: 'uninstall' },
  ),
  opt(
    'json',
    undefined,
    'bench-*: print the result as one JSON object',
    (c) => {
      c.json = true;
    },
    { key: null, scope: 'bench' },
  ),
];

/** Whether `command` accepts an option of `scope`. */
export function scopeAllows(command: Command, scope: Scope): boolean {
  switch (command) {
    case 'install':
      return scope === 'install' || scope === 'certificate';
    case 'uninstall':
      return scope === 'uninstall';
    case 'status':
      return false;
    case 'resync-peer':
      return scope === 'run' || scope === 'resync' || scope === 'certificate';
    default:
      return scope === 'run' || scope === 'certificate' || (scope === 'bench' && command.startsWith('bench-'));
  }
}

export const optionByFlag: ReadonlyMap<string, OptionDef> = new Map(optionDefs.map((d) => [d.flag, d]));
export const optionByKey: ReadonlyMap<string, OptionDef> = new Map(
  optionDefs.filter((d) => d.key !== undefined).map((d) => [d.key!, d]),
);
