/**
 * Fetching a share along its route. The share code's locator names the server
 * that took the publish (the owner, primary) and its ring successor; the
 * topology of the configured server says where each owner's shares are served:
 * a route `OWNER=PRIMARY[,FAILOVER...]`, tried in that order. Without a route
 * for the owner, the owner and then the secondary are tried. Disabled servers
 * are skipped.
 *
 * Only failures of a server itself (unreachable, timed out, untrusted
 * certificate, garbled answer, 5xx, 421 "not served here") move on to the
 * next candidate. An answer
 * about the share (found, pending, expired, not found, typo, rate limited) is
 * final: another server would not know better, and trying it would only hide
 * the real reason.
 */
import { errorCode, errorMessage } from '../errors.js';
import { fetchShare, topology as fetchTopology, type ClientOptions, type FetchedShare } from './client.js';
import { ServerUnreachableError } from './errors.js';
import { keyServerUrlProblem } from './server-url.js';
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
}

const ATTEMPT_TIMEOUT_MS = 8000;

/** Codes that mean "this server could not answer", not "this is the answer". */
const SERVER_FAILURES = new Set([
  'SERVER_UNREACHABLE', 'SERVER_UNTRUSTED', 'SERVER_PROTOCOL', 'STORE_UNAVAILABLE', 'INTERNAL', 'ROUTE_NOT_FOUND', 'METHOD_NOT_ALLOWED',
  // 421: a live server that does not serve this owner (a standby not promoted yet, a stale topology).
  'SHARE_NOT_SERVED_HERE',
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
export function candidateServers(topology: TopologyResponse, code: ShareCode, configured: string | readonly string[]): Candidate[] {
  const route = topology.routes.find((r) => r.owner === code.primary);
  const ids = route ? [route.primary, ...route.failovers] : [code.primary, code.secondary];
  const out: Candidate[] = [];
  for (const id of ids) {
    const server = topology.servers.find((s) => s.id === id);
    if (!server || server.status === 'disabled') continue;
    const url = server.url.replace(/\/+$/, '');
    // A topology is the server's word: an entry that breaks the URL rule is passed over, not obeyed.
    if (keyServerUrlProblem(url) !== null || out.some((c) => c.url === url)) continue;
    out.push({ id, url });
  }
  for (const url of typeof configured === 'string' ? [configured] : configured) {
    if (!out.some((c) => c.url === url)) out.push({ id: null, url });
  }
  return out;
}

/** The topology from the first of `urls` that answers; the last server failure when none does. */
async function firstTopology(urls: readonly string[], opts: ClientOptions): Promise<TopologyResponse> {
  let last: unknown = new ServerUnreachableError('no key server URL given');
  for (const url of urls) {
    try {
      return await fetchTopology(url, opts);
    } catch (err) {
      if (!isServerFailure(err)) throw err;
      last = err;
    }
  }
  throw last;
}

/**
 * Reads the topology from the first of `serverUrls` that answers (one URL, as
 * the CLI has, or several), then fetches `rawCode` from the candidates in order. Throws the share's own error (pending, expired, ...)
 * as soon as a server gives one; SERVER_UNREACHABLE naming every server tried
 * when none could answer. The code is checked locally first (CODE_TYPO).
 */
export async function fetchAlongRoute(serverUrls: string | readonly string[], rawCode: string, opts: ClientOptions = {}): Promise<RoutedShare> {
  const code = parseShareCode(rawCode);
  const configured = typeof serverUrls === 'string' ? [serverUrls] : serverUrls;
  // A primary that swallows packets should not hold the failover back for long.
  const attemptOpts: ClientOptions = { ...opts, timeoutMs: opts.timeoutMs ?? ATTEMPT_TIMEOUT_MS };
  const topology = await firstTopology(configured, attemptOpts);
  const attempts: Attempt[] = [];
  for (const candidate of candidateServers(topology, code, configured)) {
    try {
      const share = await fetchShare(candidate.url, code.display, attemptOpts);
      attempts.push(candidate);
      return { share, answeredBy: candidate, attempts, topology };
    } catch (err) {
      if (!isServerFailure(err)) throw err;
      attempts.push({ ...candidate, error: errorMessage(err) });
    }
  }
  const tried = attempts.map((a) => `${a.id === null ? 'server' : `server ${a.id}`} (${a.url}): ${a.error}`).join('; ');
  throw new ServerUnreachableError(`no server of share ${code.display} could answer: ${tried}`);
}
