/**
 * The key server check of `stash doctor`: is a server configured (and where),
 * and does it answer GET /v1/topology within a short timeout? No server
 * configured is normal (the vault works without one) and is only reported.
 */
import { errorCode, errorMessage } from '../errors.js';
import type { DoctorCheck } from './doctor-checks.js';
import { findKeyServerUrl } from './key-server-url.js';

const TIMEOUT_MS = 3000;

export interface KeyServerReport {
  url: string | null;
  from: string | null;
  reachable: boolean | null;
  clusterId?: string;
  topologyVersion?: number;
  servers?: number;
  error?: string;
}

export async function keyServerChecks(): Promise<{ checks: DoctorCheck[]; keyServer: KeyServerReport }> {
  const section = 'keyserver' as const;
  let found;
  try {
    found = await findKeyServerUrl({});
  } catch (err) {
    const detail = `unknown: ${errorMessage(err)}`;
    return {
      checks: [{ section, name: 'key server', status: 'info', detail }],
      keyServer: { url: null, from: null, reachable: null, error: errorMessage(err) },
    };
  }
  if (!found) {
    return {
      checks: [
        {
          section,
          name: 'key server',
          status: 'info',
          detail:
            'not configured (needed only to publish or receive keys: --server, STASH_KEY_SERVER_URL or key_server_url)',
        },
      ],
      keyServer: { url: null, from: null, reachable: null },
    };
  }
  const { topology } = await import('../keyserver/client.js');
  try {
    const t = await topology(found.url, { timeoutMs: TIMEOUT_MS });
    // Remembered for `contact receive`: the way to a failover when this server is down (topology-cache.ts).
    const { saveTopology } = await import('./topology-cache.js');
    saveTopology(t, found.url, [found.url]);
    return {
      checks: [
        {
          section,
          name: 'key server',
          status: 'ok',
          detail: `${found.url} (from ${found.from}) answers: cluster ${t.clusterId}, topology version ${t.topologyVersion}, ${t.servers.length} server(s)`,
        },
      ],
      keyServer: {
        url: found.url,
        from: found.from,
        reachable: true,
        clusterId: t.clusterId,
        topologyVersion: t.topologyVersion,
        servers: t.servers.length,
      },
    };
  } catch (err) {
    const untrusted = errorCode(err) === 'SERVER_UNTRUSTED';
    return {
      checks: [
        {
          section,
          name: 'key server',
          status: 'fail',
          detail: `${found.url} (from ${found.from}): ${errorMessage(err)}`,
          fix: untrusted
            ? 'for a private CA, point NODE_EXTRA_CA_CERTS at its certificate (PEM); never turn verification off'
            : `check the URL and that the server runs (curl ${found.url}/v1/topology -H 'Accept: application/json')`,
        },
      ],
      keyServer: { url: found.url, from: found.from, reachable: false, error: errorMessage(err) },
    };
  }
}
