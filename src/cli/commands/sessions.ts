/**
 * `stash vault sessions [--json] | lock CONTAINER | lock-all | stop`.
 * None of them starts an agent: with none running there is nothing unlocked.
 * Cached ids are mapped back to names through the container headers of the
 * current vault; the vault key itself shows as "(vault)".
 */
import type { AgentClient } from '../../agent/client.js';
import { StashError, errorCode } from '../../errors.js';
import { defaultVaultDir, listContainers, readVaultInfo, validateContainerName } from '../../vault/index.js';
import { formatDuration, formatTable, out, outJson } from '../output.js';
import type { Invocation } from '../registry.js';

/** A running agent, or null when none answers. Other problems (unsafe folder) are errors. */
async function runningAgent(): Promise<AgentClient | null> {
  const { connectAgent } = await import('../../agent/autostart.js');
  try {
    return await connectAgent({ autostart: false });
  } catch (err) {
    if (errorCode(err) === 'AGENT_UNAVAILABLE') return null;
    throw err;
  }
}

interface NamedIds {
  vaultId: string | null;
  byId: Map<string, string>;
}

/** Container ids of the current vault (headers only); empty when there is no vault. */
function namesOfVault(dir: string): NamedIds {
  try {
    const vaultId = readVaultInfo(dir).vaultId;
    const byId = new Map<string, string>();
    for (const c of listContainers(dir)) if (c.id) byId.set(c.id, c.name);
    return { vaultId, byId };
  } catch {
    return { vaultId: null, byId: new Map() };
  }
}

export async function run(inv: Invocation): Promise<number> {
  const action = inv.command.path[2] ?? 'list';
  const agent = await runningAgent();
  try {
    switch (action) {
      case 'lock':
        return await lock(agent, inv.positionals[0]!);
      case 'lock-all': {
        const n = agent ? await agent.forgetAll() : 0;
        out(agent ? `Forgot ${n} cached key${n === 1 ? '' : 's'}.` : 'No agent is running; nothing is unlocked.');
        return 0;
      }
      case 'stop':
        return await stop(agent);
      default:
        return await list(agent, inv.values.json === true);
    }
  } finally {
    agent?.close();
  }
}

async function list(agent: AgentClient | null, json: boolean): Promise<number> {
  const entries = agent ? await agent.list() : [];
  const dir = defaultVaultDir();
  const names = namesOfVault(dir);
  const rows = entries.map((e) => {
    const id = e.id.toString('hex');
    const name = id === names.vaultId ? '(vault)' : names.byId.get(id) ?? null;
    return { name, id, path: e.path, ttl: e.ttl, expiresInSeconds: Math.round(e.expiresInMs / 1000) };
  });
  rows.sort((a, b) => (a.name === '(vault)' ? -1 : b.name === '(vault)' ? 1 : (a.name ?? '~').localeCompare(b.name ?? '~')));
  if (json) {
    outJson({ agentRunning: agent !== null, sessions: rows });
    return 0;
  }
  if (!agent) {
    out('No agent is running; nothing is unlocked.');
    return 0;
  }
  if (rows.length === 0) {
    out('Nothing is unlocked.');
    return 0;
  }
  const table = rows.map((r) => [r.name ?? '(other vault)', r.path ?? '-', formatDuration(r.expiresInSeconds * 1000)]);
  for (const line of formatTable(['NAME', 'PATH', 'EXPIRES IN'], table)) out(line);
  return 0;
}

async function lock(agent: AgentClient | null, target: string): Promise<number> {
  const dir = defaultVaultDir();
  const entries = agent ? await agent.list() : [];
  // A path names the entry directly (any vault); otherwise it is a container name of this vault.
  let match = entries.find((e) => e.path === target);
  if (!match) {
    const looksLikeName = !target.includes('/') && !target.includes('\\');
    if (!looksLikeName) throw new StashError('NOT_FOUND', `nothing unlocked at ${target}`);
    validateContainerName(target);
    const names = namesOfVault(dir);
    const id = [...names.byId].find(([, n]) => n === target)?.[0];
    if (id === undefined) throw new StashError('CONTAINER_NOT_FOUND', `no container named ${JSON.stringify(target)} in the vault at ${dir}`);
    match = entries.find((e) => e.id.toString('hex') === id);
  }
  if (!agent || !match) {
    out(`${target} is not unlocked.`);
    return 0;
  }
  await agent.forget(match.id);
  out(`Locked ${target}.`);
  return 0;
}

async function stop(agent: AgentClient | null): Promise<number> {
  if (!agent) {
    out('No agent is running.');
    return 0;
  }
  const pid = (await agent.status()).pid;
  await agent.stop();
  // Wait (briefly) until the process is gone, so that "stopped" is true when we say it.
  if (typeof pid === 'number') {
    for (let i = 0; i < 100 && alive(pid); i++) await new Promise((r) => setTimeout(r, 20));
  }
  out(`Stopped the agent${typeof pid === 'number' ? ` (pid ${pid})` : ''}; its keys were wiped.`);
  return 0;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}
