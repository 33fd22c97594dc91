/**
 * What the HTTP side of the key server asks of the rest: publish, fetch,
 * verification, status, replication, unpublish and manage links. The store's
 * process answers from its own service (localBackend); a fetch process (multi/fetch-process.ts)
 * answers fetches from its own cache and forwards the rest to the store's
 * process (multi/remote-backend.ts). The routes and the fetch fast path see
 * only this interface, so both processes answer with the same code.
 */
import type { IncomingHttpHeaders } from 'node:http';
import type { Clock } from './clock.js';
import { MISS_TOKENS, chargingMisses, type FetchBackend } from './http/share-fetch.js';
import { RequestLimiter } from './limits/token-bucket.js';
import { WindowLimiter } from './limits/window-limiter.js';
import type { ReplicateAck } from './replication/batch.js';
import type { ReplicationReceiver } from './replication/inbound.js';
import type { PeerStatus } from './replication/outbound.js';
import type { ShareService, VerificationView } from './service.js';
import type { ServiceConfig } from './server-config.js';
import type {
  CreatedResponse,
  StatusResponse,
  TopologyResponse,
  UnpublishRequest,
  UnpublishedResponse,
} from './wire/messages.js';
import type { ManageView } from './withdraw.js';
import { KeyServerError } from './errors.js';

/** /v1/status in full: the counts, the JSON-only details, the replication peers. */
export interface StatusReport {
  status: StatusResponse;
  details: ReturnType<ShareService['statusDetails']>;
  peers: PeerStatus[];
}

export interface KeyServerBackend extends FetchBackend {
  publish(publicKey: Uint8Array, email: string, clientKey: string): Promise<CreatedResponse>;
  verificationInfo(token: string): VerificationView | undefined | Promise<VerificationView | undefined>;
  confirm(token: string): Promise<VerificationView | undefined>;
  topology(): TopologyResponse;
  statusReport(): StatusReport | Promise<StatusReport>;
  /** POST /v1/replicate: checks and applies one signed batch. */
  replicate(headers: IncomingHttpHeaders, body: Uint8Array, nowMs: number): Promise<ReplicateAck>;
  /** GET /metrics: the exposition of the whole server, every process included (metrics/server-view.ts). */
  metricsText(): Promise<string>;
  /** A signed unpublish of a share this server serves (withdraw.ts); the route forwards the others. */
  unpublish(req: UnpublishRequest, clientKey: string): Promise<UnpublishedResponse>;
  /** POST /manage: mails a manage link when shares for the address are here. */
  requestManageLink(email: string, clientKey: string): Promise<void>;
  /** GET /manage/<token>. */
  manageView(token: string): ManageView | undefined | Promise<ManageView | undefined>;
  /** POST /manage/<token>: deletes one share of the link's address (or all without a code). */
  manageDelete(token: string, code: string | undefined, clientKey: string): Promise<ManageView | undefined>;
}

/** The request limiters of one process. */
export interface Limiters {
  requests: RequestLimiter;
  emails: WindowLimiter;
  emailIps: WindowLimiter;
}

export function createLimiters(config: ServiceConfig, clock: Clock): Limiters {
  return {
    // A miss is let in on one token and charged the rest after: the bucket may owe that much.
    requests: new RequestLimiter({
      perMinute: config.rateLimitPerMinute,
      burst: config.rateLimitBurst,
      clock,
      maxDebt: MISS_TOKENS - 1,
    }),
    emails: new WindowLimiter({ limit: config.verificationEmailRateLimitPerHour, clock }),
    emailIps: new WindowLimiter({ limit: config.verificationEmailIpRateLimitPerHour, clock }),
  };
}

/** The backend of the store's process: its own service and replication receiver, and what renders /metrics. */
export function localBackend(
  service: ShareService,
  receiver: ReplicationReceiver | undefined,
  metricsText: () => Promise<string>,
): KeyServerBackend {
  return {
    metricsText,
    fetchBody: (code, encoding, client) => chargingMisses(() => service.fetchBody(code, encoding), client),
    publish: (publicKey, email, clientKey) => service.publish(publicKey, email, clientKey),
    verificationInfo: (token) => service.verificationInfo(token),
    confirm: (token) => service.confirm(token),
    topology: () => service.topology(),
    statusReport: () => ({ status: service.status(), details: service.statusDetails(), peers: service.peerStatus() }),
    replicate: async (headers, body, nowMs) => {
      if (!receiver)
        throw new KeyServerError(
          'REPLICATION_UNAUTHORIZED',
          'ReplicationUnauthorized: replication is not enabled on this server',
        );
      return receiver.receive(headers, body, nowMs);
    },
    unpublish: (req, clientKey) => service.withdrawals.unpublish(req, clientKey),
    requestManageLink: (email, clientKey) => service.withdrawals.requestManageLink(email, clientKey),
    manageView: (token) => service.withdrawals.manageView(token),
    manageDelete: (token, code, clientKey) => service.withdrawals.manageDelete(token, code, clientKey),
  };
}
