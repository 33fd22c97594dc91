/**
 * The shape of a key server's settings, beside the server that runs on them:
 * ServerConfig is what the option parser (cli/options.ts, from flags and
 * config files) fills in and every part of the server reads; ServiceConfig is
 * what a running server settled on. Types only: the parser depends on this
 * file, never the other way round.
 */

export type TopologyStatus = 'active' | 'standby' | 'promoted' | 'disabled';

export interface TopologyServer {
  id: number;
  url: string;
  status: TopologyStatus;
}

export interface Route {
  owner: number;
  primary: number;
  failovers: number[];
}

export interface BindAddress {
  host: string;
  port: number;
}

/** Every setting a server process can be given. */
export interface ServerConfig {
  bind: BindAddress;
  stateDir: string;
  developer: boolean;
  serverId: number;
  clusterId: string;
  publicUrl: string | undefined;
  topologyVersion: number;
  topologyServers: TopologyServer[];
  routes: Route[];
  promotedOwners: number[];
  replicationToken: string | undefined;
  /** Read into replicationToken after parsing (a root-only file handed over by systemd's LoadCredential=). */
  replicationTokenFile: string | undefined;
  replicationPeerUrls: string[];
  /** undefined: the current time in milliseconds when the server starts. */
  originEpoch: number | undefined;
  requests: number;
  payloadBytes: number;
  concurrency: number;
  preloadShares: number;
  compactMinBytes: number;
  rateLimitPerMinute: number;
  rateLimitBurst: number;
  verificationEmailCommand: string | undefined;
  verificationEmailRateLimitPerHour: number;
  verificationEmailIpRateLimitPerHour: number;
  tlsCert: string | undefined;
  tlsKey: string | undefined;
  /** Names to obtain a certificate for over ACME (TLS-ALPN-01 on the server's own port); empty: no ACME. */
  acmeDomains: string[];
  acmeEmail: string | undefined;
  /** undefined: Let's Encrypt (LETS_ENCRYPT_DIRECTORY). */
  acmeDirectory: string | undefined;
  shareTtlSeconds: number;
  trustProxy: boolean;
  /** run: processes serving HTTP over the one store (1: this process alone; 'auto': what fits the memory target, 1 today: run.ts AUTO_PROCESSES). */
  processes: number | 'auto';
  /** What store, logs and damaged copies may take on disk together (disk/budget.ts splits it). */
  diskCapBytes: number;
  /** run: write the log to this file, rotated by size, instead of stderr. */
  logFile: string | undefined;
  /** run: serve GET /metrics on this address too (plain HTTP, to anyone who reaches it). */
  metricsBind: BindAddress | undefined;
  /** resync-peer only. */
  peerUrl: string | undefined;
  /** install only. */
  forceConfig: boolean;
  /** uninstall only. */
  purgeData: boolean;
  /** bench-* only: print the result as JSON. */
  json: boolean;
}

/** The configuration a running server settled on (URLs resolved, epoch fixed). */
export interface ServiceConfig extends ServerConfig {
  publicUrl: string;
  originEpoch: number;
}
