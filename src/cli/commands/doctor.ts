/**
 * `stash doctor [--json]`: every check with a mark, and a one-line fix under
 * each failure. Exit status 0 only when nothing failed (warnings pass).
 */
import { liveAgents } from '../../agent/discover.js';
import { agentCandidates, agentEndpoint } from '../../agent/paths.js';
import {
  agentChecks,
  agentsCheck,
  agentStatus,
  configChecks,
  securityChecks,
  suspendChecks,
  type DoctorCheck,
} from '../doctor-checks.js';
import { keyServerChecks } from '../doctor-keyserver.js';
import { sessionLockChecks } from '../doctor-lock.js';
import { vaultChecks } from '../doctor-vault.js';
import { mark, out, outJson, paint } from '../output.js';
import type { Invocation } from '../command-types.js';

const TITLES: Record<DoctorCheck['section'], string> = {
  agent: 'Session agent',
  security: 'Agent security',
  suspend: 'Suspend protection',
  lock: 'Session lock',
  config: 'Configuration',
  vault: 'Vault',
  keyserver: 'Key server',
};

export async function run(inv: Invocation): Promise<number> {
  // Security first: it inspects the socket folder before anything connects to it.
  const before = await securityChecks();
  const agent = await agentStatus();
  // Every folder where an agent of this user may listen: two agents at once is worth a warning.
  const agents = await liveAgents(agentCandidates());
  // An agent doctor started has just created the socket folder: report it as it is now, not "not created yet".
  const security = agent.started ? await securityChecks() : before;
  const config = await configChecks(agent.status);
  const vault = vaultChecks();
  const keyServer = await keyServerChecks();
  const checks = [
    ...agentChecks(agent.status, agent.error, agent.started, agentEndpoint().dir),
    ...agentsCheck(agents, agent.status?.pid),
    ...security,
    ...suspendChecks(agent.status),
    ...sessionLockChecks(agent.status),
    ...config.checks,
    ...vault.checks,
    ...keyServer.checks,
  ];
  const failed = checks.filter((c) => c.status === 'fail');
  if (inv.values.json === true) {
    outJson({
      ok: failed.length === 0,
      checks,
      agent: agent.status,
      agents,
      config: config.config,
      vault: vault.vault,
      keyServer: keyServer.keyServer,
    });
    return failed.length === 0 ? 0 : 1;
  }
  let section: string | null = null;
  for (const c of checks) {
    if (c.section !== section) {
      if (section !== null) out();
      section = c.section;
      out(paint('bold', TITLES[c.section]));
    }
    out(`${mark(c.status)} ${c.name}: ${c.detail}`);
    if (c.fix && c.status !== 'ok') out(`       fix: ${c.fix}`);
  }
  out();
  const warned = checks.filter((c) => c.status === 'warn').length;
  out(
    failed.length === 0
      ? `No problems found${warned ? ` (${warned} warning${warned === 1 ? '' : 's'})` : ''}.`
      : `${failed.length} problem${failed.length === 1 ? '' : 's'} found: ${failed.map((c) => c.name).join(', ')}.`,
  );
  return failed.length === 0 ? 0 : 1;
}
