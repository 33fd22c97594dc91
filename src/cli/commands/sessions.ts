/**
 * `stash vault sessions [--json] | lock CONTAINER | lock-all | stop`.
 * None of them starts an agent: with none running there is nothing unlocked.
 * Cached ids are mapped back to names through the container headers of the
 * current vault; the vault key itself shows as "(vault)".
 */
import type { AgentClient } from '../../agent/client.js';
import type { ListEntry } from '../../protocol/messages.js';
import { StashError, errorCode } from '../../errors.js';
import {
  byCodeUnits,
  defaultVaultDir,
  listContainers,
  readVaultInfo,
  validateContainerName,
} from '../../vault/index.js';
import { formatDuration, formatTable, out, outJson } from '../output.js';
import type { Invocation } from '../command-types.js';
import { alive } from '../../process-state.js';

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
  /** Every container of the vault by name, with its file (an id of '' when its header cannot be read). */
  byName: Map<string, { id: string; path: string }>;
}

/** Container ids of the vault at `dir` (headers only); empty when there is no vault there. */
function namesOfVault(dir: string): NamedIds {
  try {
    const vaultId = readVaultInfo(dir).vaultId;
    const byId = new Map<string, string>();
    const byName = new Map<string, { id: string; path: string }>();
    for (const c of listContainers(dir)) {
      if (c.id) byId.set(c.id, c.name);
      byName.set(c.name, { id: c.id, path: c.path });
    }
    return { vaultId, byId, byName };
  } catch {
    return { vaultId: null, byId: new Map(), byName: new Map() };
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
    const name = id === names.vaultId ? '(vault)' : (names.byId.get(id) ?? null);
    return { name, id, path: e.path, ttl: e.ttl, expiresInSeconds: Math.round(e.expiresInMs / 1000) };
  });
  rows.sort((a, b) =>
    a.name === '(vault)' ? -1 : b.name === '(vault)' ? 1 : byCodeUnits(a.name ?? '~', b.name ?? '~'),
  );
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
  // What a lock forgets depends on this row: say which case holds (docs/cli.md, Sessions).
  if (rows.some((r) => r.name === '(vault)')) {
    out(
      "The vault key opens every container of this vault; `stash vault sessions lock NAME` forgets NAME's key and the vault key.",
    );
  } else if (names.vaultId !== null) {
    out('The vault key is not cached: only the containers listed open without a password.');
  }
  return 0;
}

/**
 * Forgets a container's content key and every cached vault key that could
 * derive it again: a vault key unwraps (or, for a shared container, unseals)
 * every content key of its vault, so forgetting the container's key alone
 * would let the next command re-derive it without a password. Other
 * containers' content keys stay cached.
 */
async function lock(agent: AgentClient | null, target: string): Promise<number> {
  const dir = defaultVaultDir();
  const entries = agent ? await agent.list() : [];
  const hex = (e: ListEntry): string => e.id.toString('hex');
  // A path names the entry directly (any vault); otherwise it is a container name of this vault.
  let containerId: string | null = null;
  let containerPath: string | null = null;
  const byPath = entries.find((e) => e.path === target);
  if (byPath) {
    containerId = hex(byPath);
    containerPath = target;
  } else {
    const looksLikeName = !target.includes('/') && !target.includes('\\');
    const names = namesOfVault(dir);
    if (looksLikeName) validateContainerName(target);
    const found = looksLikeName ? names.byName.get(target) : [...names.byName.values()].find((c) => c.path === target);
    if (!found) {
      if (!looksLikeName) throw new StashError('NOT_FOUND', `nothing unlocked at ${target}`);
      throw new StashError(
        'CONTAINER_NOT_FOUND',
        `no container named ${JSON.stringify(target)} in the vault at ${dir}`,
      );
    }
    containerId = found.id || null;
    containerPath = found.path;
  }
  const own = entries.filter(
    (e) => (containerId !== null && hex(e) === containerId) || (containerPath !== null && e.path === containerPath),
  );
  // The vault keys that could open it again: a cached key whose path is a vault that holds this container.
  const vaults = entries.filter((e) => {
    if (!e.path || own.includes(e)) return false;
    const names = namesOfVault(e.path);
    if (names.vaultId !== hex(e)) return false;
    return (
      (containerId !== null && names.byId.has(containerId)) ||
      [...names.byName.values()].some((c) => c.path === containerPath)
    );
  });
  if (!agent || own.length + vaults.length === 0) {
    out(`${target} is not unlocked.`);
    return 0;
  }
  for (const e of [...own, ...vaults]) await agent.forget(e.id);
  const others = entries.filter((e) => !own.includes(e) && !vaults.includes(e)).length;
  out(`Locked ${target}: ${describeForgotten(own.length > 0, vaults.length > 0)}.`);
  if (vaults.length > 0 && others > 0) {
    out(
      'Containers still open keep working; opening another one, or writing to a shared one, asks for the password again.',
    );
  }
  return 0;
}

function describeForgotten(container: boolean, vault: boolean): string {
  if (container && vault) return 'forgot its key and the vault key, which could open it again';
  if (vault) return 'forgot the vault key, which could open it';
  return 'forgot its key';
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
