/**
 * Fetching a share along its route. The share code's locator names the server
 * that took the publish (the owner, primary) and its ring successor; the
 * topology of the configured server says where each owner's shares are served:
 * a route `OWNER=PRIMARY[,FAILOVER...]`, tried in that order. Without a route
 * for the owner, the owner and then the secondary are tried. Disabled servers
 * are skipped.
 *
 * A server URL may be written as the base or as its /v1/share endpoint, in
 * the configuration and in a topology alike (src/config/server-url.ts, keyServerBase).
 *
 * Every server of a ring answers a fetch of any share it has a route for,
 * forwarding it to the owner's servers (forward.ts), so one live server is
 * enough; the route order still goes to the owner first, which saves the hop.
 * Only failures of a server itself (unreachable, timed out, untrusted
 * certificate, garbled answer, 5xx, 502 "the owner's servers did not
 * answer", 421 "no route here") move on to the next candidate. An answer
 * about the share (found, pending, expired, not found, typo, rate limited) is
 * final: another server would not know better, and trying it would only hide
 * the real reason.
 */
import { errorCode, errorMessage } from '../errors.js';
import { fetchShare, topology as fetchTopology, type ClientOptions, type FetchedShare } from './client.js';
import { ServerUnreachableError } from './errors.js';
import { keyServerBase, keyServerUrlProblem } from '../config/server-url.js';
import { parseShareCode, type ShareCode } from './share-code.js';
import type { TopologyResponse } from './wire/messages.js';

export interface Candidate {
  /** Server id in the topology; null for the configured URL used as a last resort. */
  id: number | null;
  url: string;
}

export interface Attempt extends Candidate {
  /** Why this server did not answer; absent for the one that did. */
  error?: string;
}

export interface RoutedShare {
  share: FetchedShare;
  /** The server that answered. */
  answeredBy: Candidate;
  /** Every server tried, in order, the answering one last. */
  attempts: Attempt[];
  topology: TopologyResponse;
  /** Where the topology came from: a server's answer (its URL), or the cache (`cached`). */
  topologySource: { kind: 'server'; url: string } | { kind: 'cache' };
  /** Why the configured servers could not give a topology, when another source was used. */
  topologyError?: string;
}

export interface RouteOptions extends ClientOptions {
  /**
   * A topology learned earlier from this cluster (the CLI's cache), for when
   * no configured server answers: its servers are asked for a fresh topology
   * first, and it is used itself when none of them answers either. A newer
   * cached version also wins over an older one a server answers with.
   */
  cached?: TopologyResponse | null;
}

const ATTEMPT_TIMEOUT_MS = 8000;

/** Codes that mean "this server could not answer", not "this is the answer". */
const SERVER_FAILURES = new Set([
  'SERVER_UNREACHABLE',
  'SERVER_UNTRUSTED',
  'SERVER_PROTOCOL',
  'STORE_UNAVAILABLE',
  'INTERNAL',
  'ROUTE_NOT_FOUND',
  'METHOD_NOT_ALLOWED',
  // 421: a live server that knows no route to this owner (a stale topology).
  'SHARE_NOT_SERVED_HERE',
  // 502: a live server that forwarded the request, but none of the owner's servers answered it (forward.ts).
  'OWNER_UNREACHABLE',
]);

/** True when another server should be tried after this error. */
export function isServerFailure(err: unknown): boolean {
  const code = errorCode(err);
  return code !== undefined && SERVER_FAILURES.has(code);
}

/**
 * The servers to try for `code`, in order: the route of its owner (primary,
 * then failovers), else the owner and its secondary. Unknown ids and disabled
 * servers are left out; each URL appears once. The configured server comes
 * last when it is not in the list already: the topology may name addresses
 * this client cannot reach, and a server that does not serve the owner says
 * so (421) and is passed over.
 */
export function candidateServers(
  topology: TopologyResponse,
  code: ShareCode,
  configured: string | readonly string[],
): Candidate[] {
  const route = topology.routes.find((r) => r.owner === code.primary);
  const ids = route ? [route.primary, ...route.failovers] : [code.primary, code.secondary];
  const out: Candidate[] = [];
  for (const id of ids) {
    const server = topology.servers.find((s) => s.id === id);
    if (!server || server.status === 'disabled') continue;
    const url = keyServerBase(server.url);
    // A topology is the server's word: an entry that breaks the URL rule is passed over, not obeyed.
    if (keyServerUrlProblem(url) !== null || out.some((c) => c.url === url)) continue;
    out.push({ id, url });
  }
  for (const raw of typeof configured === 'string' ? [configured] : configured) {
    const url = keyServerBase(raw);
    if (!out.some((c) => c.url === url)) out.push({ id: null, url });
  }
  return out;
}

/** The topology from the first of `urls` that answers, and its URL; the last server failure when none does. */
async function firstTopology(
  urls: readonly string[],
  opts: ClientOptions,
): Promise<{ topology: TopologyResponse; url: string }> {
  let last: unknown = new ServerUnreachableError('no key server URL given');
  for (const url of urls) {
    try {
      return { topology: await fetchTopology(url, opts), url };
    } catch (err) {
      if (!isServerFailure(err)) throw err;
      last = err;
    }
  }
  throw last;
}

type Source = Pick<RoutedShare, 'topology' | 'topologySource' | 'topologyError'>;

/**
 * The topology to route by: the configured servers' answer; else, with a
 * cached topology, a fresh answer from one of its servers (same cluster
 * only), else the cached topology itself. A cached version newer than the
 * answer (a server restarted with an old configuration) wins.
 */
async function routingTopology(configured: readonly string[], opts: RouteOptions): Promise<Source> {
  const cached = opts.cached ?? null;
  const newest = (fresh: { topology: TopologyResponse; url: string }): Source =>
    cached && cached.clusterId === fresh.topology.clusterId && cached.topologyVersion > fresh.topology.topologyVersion
      ? { topology: cached, topologySource: { kind: 'cache' } }
      : { topology: fresh.topology, topologySource: { kind: 'server', url: fresh.url } };
  try {
    return newest(await firstTopology(configured, opts));
  } catch (err) {
    if (!cached || !isServerFailure(err)) throw err;
    const topologyError = errorMessage(err);
    const others = cached.servers
      .filter((s) => s.status !== 'disabled' && keyServerUrlProblem(s.url) === null)
      .map((s) => keyServerBase(s.url))
      .filter((u) => !configured.includes(u));
    try {
      const fresh = await firstTopology(others, opts);
      if (fresh.topology.clusterId === cached.clusterId) return { ...newest(fresh), topologyError };
    } catch (err2) {
      if (!isServerFailure(err2)) throw err2;
    }
    return { topology: cached, topologySource: { kind: 'cache' }, topologyError };
  }
}

/**
 * Reads the topology from the first of `serverUrls` that answers (one URL, as
 * the CLI has, or several; `opts.cached` when none does), then fetches
 * `rawCode` from the candidates in order. Throws the share's own error
 * (pending, expired, ...) as soon as a server gives one; SERVER_UNREACHABLE
 * naming every server tried when none could answer. The code is checked
 * locally first (CODE_TYPO).
 */
export async function fetchAlongRoute(
  serverUrls: string | readonly string[],
  rawCode: string,
  opts: RouteOptions = {},
): Promise<RoutedShare> {
  const code = parseShareCode(rawCode);
  // Server URLs, configured or from a topology, are compared and shown as their base (either spelling: src/config/server-url.ts).
  const configured = (typeof serverUrls === 'string' ? [serverUrls] : serverUrls).map(keyServerBase);
  // A primary that swallows packets should not hold the failover back for long.
  const attemptOpts: RouteOptions = { ...opts, timeoutMs: opts.timeoutMs ?? ATTEMPT_TIMEOUT_MS };
  const source = await routingTopology(configured, attemptOpts);
  const attempts: Attempt[] = [];
  for (const candidate of candidateServers(source.topology, code, configured)) {
    try {
      const share = await fetchShare(candidate.url, code.display, attemptOpts);
      attempts.push(candidate);
      return { share, answeredBy: candidate, attempts, ...source };
    } catch (err) {
      if (!isServerFailure(err)) throw err;
      attempts.push({ ...candidate, error: errorMessage(err) });
    }
  }
  const tried = attempts.map((a) => `${a.id === null ? 'server' : `server ${a.id}`} (${a.url}): ${a.error}`).join('; ');
  throw new ServerUnreachableError(`no server of share ${code.display} could answer: ${tried}`);
}
