/**
 * Finding this user's agent in a folder other than the environment's own.
 * A shell with XDG_RUNTIME_DIR set and one without it (su, ssh, a systemd
 * user session) name different socket folders (paths.ts, agentCandidates);
 * without this, a command in the second would start an agent that holds no
 * keys beside the one that does.
 *
 * Another folder is trusted less than the environment's own: its agent is
 * used only when the folder passes the same checks (ours, 0700, not a link),
 * the socket file is ours, the kernel says the listening process runs as our
 * uid, and it completes the protocol's HELLO. A stale socket file, a
 * listener of another uid, or a folder someone else controls is passed over.
 */
import { lstatSync } from 'node:fs';
import { AgentClient, type ConnectOptions } from './client.js';
import { checkAgentDir, type Endpoint } from './paths.js';

const ourUid = (): number => (typeof process.getuid === 'function' ? process.getuid() : -1);

/** Why `endpoint` holds no agent of ours, or null when its socket is worth a connect. */
function notOurs(endpoint: Endpoint): string | null {
  if (endpoint.dir === null) return 'no socket folder';
  const dir = checkAgentDir(endpoint.dir);
  if (!dir.exists) return 'no such folder';
  if (!dir.ok) return dir.problem;
  try {
    const st = lstatSync(endpoint.path);
    if (!st.isSocket()) return `${endpoint.path} is not a socket`;
    if (st.uid !== ourUid()) return `${endpoint.path} is owned by uid ${st.uid}`;
  } catch {
    return 'no socket';
  }
  return null;
}

/**
 * A connection to the agent at `endpoint` when it is provably this user's
 * (see the file comment), with its HELLO done; null otherwise. Never throws:
 * whatever is wrong there, the caller goes on to the next folder.
 */
export async function connectVerified(endpoint: Endpoint, opts: ConnectOptions = {}): Promise<AgentClient | null> {
  if (notOurs(endpoint) !== null) return null;
  let client: AgentClient;
  try {
    client = await AgentClient.connect(endpoint, 2000, opts);
  } catch {
    return null; // a stale socket file: nobody listens
  }
  try {
    const uid = client.peerUid();
    if (uid !== null && uid !== ourUid()) throw new Error(`served by uid ${uid}`);
    await client.greet();
    return client;
  } catch {
    client.close();
    return null;
  }
}

/** The first of `endpoints` where an agent of this user answers (connectVerified), or null. */
export async function findAgent(endpoints: Endpoint[], opts: ConnectOptions = {}): Promise<AgentClient | null> {
  for (const endpoint of endpoints) {
    const client = await connectVerified(endpoint, opts);
    if (client) return client;
  }
  return null;
}

/** One live agent of this user, as `stash doctor` names it. */
export interface LiveAgent {
  pid: number;
  socket: string;
  source: Endpoint['source'];
  entries: number;
}

/** Every agent of this user listening at one of `endpoints` (at most one per socket), for doctor. */
export async function liveAgents(endpoints: Endpoint[]): Promise<LiveAgent[]> {
  const found: LiveAgent[] = [];
  for (const endpoint of endpoints) {
    const client = await connectVerified(endpoint, { transport: 'net' });
    if (!client) continue;
    try {
      const status = await client.status();
      found.push({
        pid: client.agentPid ?? -1,
        socket: endpoint.path,
        source: endpoint.source,
        entries: Number(status.entries ?? 0),
      });
    } catch {
      /* it went away between the HELLO and the status: not running */
    } finally {
      client.close();
    }
  }
  return found;
}
