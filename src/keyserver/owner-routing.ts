/**
 * Which server answers for which owner's shares, from the routes and topology
 * of a server's configuration: the share service, the withdrawals (withdraw.ts),
 * the forwarding of requests (forward.ts) and the store side of a multi-process
 * server all ask the same questions. Pure: configuration in, answers out.
 */
import { KeyServerError } from './errors.js';
import type { ServerConfig, ServiceConfig } from './server-config.js';
import type { TopologyResponse } from './wire/messages.js';

/** The ring successor of `id` among the enabled topology entries (itself if alone). */
export function ringSuccessor(config: ServerConfig): number {
  const ids = [
    ...new Set([config.serverId, ...config.topologyServers.filter((s) => s.status !== 'disabled').map((s) => s.id)]),
  ].sort((a, b) => a - b);
  const at = ids.indexOf(config.serverId);
  return ids[(at + 1) % ids.length]!;
}

/** Whether this server answers fetches of `owner`'s shares. */
export function servesOwner(config: ServerConfig, owner: number): boolean {
  if (config.promotedOwners.includes(owner)) return true;
  const route = config.routes.find((r) => r.owner === owner);
  return route ? route.primary === config.serverId : owner === config.serverId;
}

/**
 * A server answers fetches for the owners it is the route primary for (an
 * owner without a route belongs to the server with its id) and for its
 * promoted owners; for any other owner it names the servers to ask.
 */
export function checkServed(c: ServerConfig, owner: number): void {
  if (servesOwner(c, owner)) return;
  const where = ownerServers(c, owner)
    .filter((s) => s.id !== c.serverId)
    .map((s) => `server ${s.id} (${s.url})`);
  const hint = where.length > 0 ? `ask ${where.join(', then ')}` : 'this server knows no server for it';
  throw new KeyServerError(
    'SHARE_NOT_SERVED_HERE',
    `shares of owner ${owner} are not served by server ${c.serverId}; ${hint}`,
  );
}

/** GET /v1/topology. Statuses are the operator's (failover step 2); promoted owners are listed separately. */
export function topologyOf(c: ServiceConfig): TopologyResponse {
  const servers =
    c.topologyServers.length > 0
      ? c.topologyServers
      : [{ id: c.serverId, url: c.publicUrl, status: 'active' as const }];
  return {
    clusterId: c.clusterId,
    topologyVersion: c.topologyVersion,
    serverId: c.serverId,
    servers,
    routes: c.routes,
    promotedOwners: c.promotedOwners,
  };
}

/** The servers a client should try for `owner`, in route order (disabled ones left out). */
export function ownerServers(config: ServerConfig, owner: number): Array<{ id: number; url: string }> {
  const route = config.routes.find((r) => r.owner === owner);
  const ids = route ? [route.primary, ...route.failovers] : [owner];
  const out: Array<{ id: number; url: string }> = [];
  for (const id of ids) {
    const s = config.topologyServers.find((t) => t.id === id && t.status !== 'disabled');
    if (s) out.push({ id, url: s.url });
  }
  return out;
}
