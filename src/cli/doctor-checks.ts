/**
 * The checks of `stash doctor`, as data: each has a section, a status, a
 * one-line detail and, when it failed, a one-line fix. Gathering is separate
 * from printing (commands/doctor.ts) so --json and the text view agree.
 */
import { readFileSync } from 'node:fs';
import { dirname } from 'node:path';
import type { LiveAgent } from '../agent/discover.js';
import { describeLogTarget } from '../agent/log.js';
import { agentDirFix, agentEndpoint, checkAgentDir } from '../agent/paths.js';
import { ConfigError, errorCode, errorMessage } from '../errors.js';
import type { CheckStatus } from './output.js';
import { formatDuration } from './output.js';

export interface DoctorCheck {
  section: 'agent' | 'security' | 'suspend' | 'lock' | 'config' | 'vault' | 'keyserver';
  name: string;
  status: CheckStatus;
  detail: string;
  fix?: string;
}

type Doc = Record<string, unknown>;

const obj = (v: unknown): Doc => (typeof v === 'object' && v !== null ? (v as Doc) : {});

/** The agent's STATUS document, waiting briefly for the power integration's first attempt to settle. */
export async function agentStatus(): Promise<{ status: Doc | null; error: unknown; started: boolean }> {
  const { connectAgent } = await import('../agent/autostart.js');
  let started = false;
  let client;
  try {
    client = await connectAgent({ autostart: false });
  } catch (err) {
    if (errorCode(err) !== 'AGENT_UNAVAILABLE') return { status: null, error: err, started };
    try {
      client = await connectAgent({ autostart: true });
      started = true;
    } catch (err2) {
      return { status: null, error: err2, started };
    }
  }
  try {
    let status = await client.status();
    // A fresh agent answers before its first logind attempt is done ("not started").
    for (let i = 0; i < 50 && obj(status.power).reason === 'not started'; i++) {
      await new Promise((r) => setTimeout(r, 100));
      status = await client.status();
    }
    return { status, error: null, started };
  } catch (err) {
    return { status: null, error: err, started };
  } finally {
    client.close();
  }
}

/** Agent running: pid, uptime, cached keys, activities. */
export function agentChecks(
  status: Doc | null,
  error: unknown,
  started: boolean,
  socketDir: string | null,
): DoctorCheck[] {
  if (!status) {
    // How the CLI reaches the agent is the CLI's setting, not the agent's: Configuration does not show it.
    if (error instanceof ConfigError && error.setting === 'STASH_AGENT_TRANSPORT') {
      return [
        {
          section: 'agent',
          name: 'agent running',
          status: 'fail',
          detail: errorMessage(error),
          fix: 'set STASH_AGENT_TRANSPORT to auto (the default), blocking or net, or unset it',
        },
      ];
    }
    // One cause, one failing line: the Configuration section shows the bad value and its fix.
    if (errorCode(error) === 'CONFIG') {
      return [
        {
          section: 'agent',
          name: 'agent running',
          status: 'info',
          detail: `skipped: the agent cannot start with an invalid configuration (${errorMessage(error)}); see Configuration below`,
        },
      ];
    }
    const unsafe = errorCode(error) === 'AGENT_UNSAFE_DIR';
    return [
      {
        section: 'agent',
        name: 'agent running',
        status: 'fail',
        detail: `the agent cannot be reached or started: ${errorMessage(error)}`,
        fix: unsafe && socketDir ? socketDirFix(socketDir) : `see the agent log: ${describeLogTarget()}`,
      },
    ];
  }
  const acts = Array.isArray(status.activities) ? (status.activities as Array<{ pid: number; kind: string }>) : [];
  const actText =
    acts.length === 0 ? 'no activities' : `activities: ${acts.map((a) => `${a.kind} (pid ${a.pid})`).join(', ')}`;
  const checks: DoctorCheck[] = [
    {
      section: 'agent',
      name: 'agent running',
      status: 'ok',
      detail: `pid ${String(status.pid)}, up ${formatDuration(Number(status.uptimeSeconds ?? 0) * 1000)}${started ? ' (started by doctor)' : ''}, ${String(status.entries)} cached key(s), ${actText}; socket ${String(status.socket)}`,
    },
  ];
  const posture = obj(status.posture);
  if (posture.hardened === true && posture.dumpable === false) {
    checks.push({
      section: 'agent',
      name: 'agent hardening',
      status: 'ok',
      detail: `not dumpable, no core dumps (${(posture.actions as string[] | undefined)?.join(', ') ?? ''})`,
    });
  } else {
    checks.push({
      section: 'agent',
      name: 'agent hardening',
      status: 'fail',
      detail:
        posture.hardened === true
          ? 'the agent process is still dumpable'
          : `the agent could not harden itself: ${String(posture.error ?? 'unknown')}`,
      fix: 'rebuild the native addon (npm rebuild) and restart the agent: stash vault sessions stop',
    });
  }
  return checks;
}

/** How doctor calls each socket folder (docs/configuration.md, "Where the agent listens"). */
const FOLDER_KINDS: Partial<Record<LiveAgent['source'], string>> = {
  XDG_RUNTIME_DIR: 'XDG_RUNTIME_DIR',
  'run-user': "the uid's runtime folder",
  tmpdir: 'the fallback folder',
};

/**
 * More than one agent of this user (one found in each of two socket folders,
 * e.g. started before and after XDG_RUNTIME_DIR changed): a warning naming
 * each, since a key cached in one is not seen by commands that use the other.
 * Nothing when there is one or none.
 */
export function agentsCheck(agents: LiveAgent[], inUse: unknown): DoctorCheck[] {
  if (agents.length < 2) return [];
  const named = agents.map(
    (a) =>
      `pid ${a.pid} at ${a.socket} (${FOLDER_KINDS[a.source] ?? a.source}, ${a.entries} cached key(s))${a.pid === inUse ? ', used here' : ''}`,
  );
  const spare = agents.find((a) => a.pid !== inUse) ?? agents[1]!;
  return [
    {
      section: 'agent',
      name: 'second agent',
      status: 'warn',
      detail: `${agents.length} agents run for you: ${named.join('; ')}`,
      fix: `stop the one not used here (its keys are wiped): STASH_SESSION_AGENT_DIR=${dirname(spare.socket)} stash vault sessions stop`,
    },
  ];
}

/** The repair for an unsafe socket folder: chmod for one's own, a move elsewhere for a squatted one. */
function socketDirFix(dir: string): string {
  return agentDirFix({ dir, source: agentEndpoint().source }, checkAgentDir(dir));
}

const SECURITY_FIXES: Record<string, (socketDir: string) => string> = {
  'peer credentials': () =>
    'the native addon is needed to check who connects: rebuild it (npm rebuild); see docs/platforms.md',
  dumpable: () => 'the kernel refused PR_SET_DUMPABLE; check the security modules and container runtime',
  'core dumps': () => 'disable core dumps: ulimit -c 0 (or a core limit of 0 in limits.conf)',
  'mlock limit': () => 'raise the locked-memory limit: ulimit -l, or memlock in /etc/security/limits.conf',
  hardening: () => 'the native addon failed to load: rebuild it (npm rebuild)',
};

/** Socket folder, peer credentials, dumpable/core dumps, mlock limit (the agent's own checks). */
export async function securityChecks(): Promise<DoctorCheck[]> {
  const { securityChecks: run } = await import('../agent/security-check.js');
  const socketDir = agentEndpoint().dir ?? '';
  return (await run()).map((c) => ({
    section: 'security' as const,
    name: c.name,
    status: c.ok ? ('ok' as const) : ('fail' as const),
    detail: c.detail,
    ...(c.ok ? {} : { fix: c.fix ?? (SECURITY_FIXES[c.name] ?? (() => 'see docs/platforms.md'))(socketDir) }),
  }));
}

/** Whether this machine can suspend at all, and how we know. */
export interface SuspendCapability {
  canSuspend: boolean;
  why: string;
}

/**
 * Linux lists the sleep states the kernel offers in /sys/power/state
 * ("freeze mem disk"); a container or a VM without power management has the
 * file empty or missing, and such a machine never suspends, so there are no
 * keys to wipe before a suspend. STASH_SYS_POWER_STATE names another file
 * (tests: this very machine has an empty one). Other platforms are taken to
 * suspend.
 */
export function suspendCapability(
  env: NodeJS.ProcessEnv = process.env,
  platform: NodeJS.Platform = process.platform,
): SuspendCapability {
  if (platform !== 'linux') return { canSuspend: true, why: `${platform} can suspend` };
  const path = env.STASH_SYS_POWER_STATE || '/sys/power/state';
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ENOTDIR') return { canSuspend: false, why: `${path} does not exist` };
    // Unreadable for another reason: assume the machine suspends, the safe side.
    return { canSuspend: true, why: `${path} cannot be read (${code ?? 'error'})` };
  }
  const states = text.trim();
  return states === ''
    ? { canSuspend: false, why: `${path} lists no sleep state` }
    : { canSuspend: true, why: `${path}: ${states}` };
}

/** What the suspend checks read from the agent's power status, gathered once. */
interface PowerFacts {
  power: Doc;
  backend: string;
  /** " via <library>", or empty. */
  library: string;
  reason: string | null;
  /** The fix every failing suspend line gives (all come from the backend). */
  fixBackend: string;
  /** agent.prevent_sleep is off. */
  sleepAllowed: boolean;
}

/** The single [info] line that stands for the whole section when there is nothing to check. */
function suspendInfo(detail: string): DoctorCheck[] {
  return [{ section: 'suspend', name: 'suspend protection', status: 'info', detail }];
}

/** Backend, library, reason and the shared fix, read from the agent's STATUS document. */
function powerFacts(status: Doc): PowerFacts {
  const power = obj(status.power);
  const backend = String(power.backend ?? 'none');
  return {
    power,
    backend,
    library: power.library ? ` via ${String(power.library)}` : '',
    reason: power.reason ? String(power.reason) : null,
    fixBackend:
      backend === 'logind'
        ? 'suspend protection needs systemd-logind (or elogind) on the system bus: start it, or check DBUS_SYSTEM_BUS_ADDRESS'
        : 'this platform has no supported suspend notification; keys are only cleared by TTL',
    sleepAllowed: status.preventSleep === false,
  };
}

/** No backend: one failing (or, with agent.prevent_sleep off, warning) line, the rest skipped. */
function backendMissingChecks(p: PowerFacts): DoctorCheck[] {
  const optional = p.sleepAllowed;
  const skipped = `skipped: ${p.backend} is unavailable (see inhibitor backend)`;
  return [
    {
      section: 'suspend',
      name: 'inhibitor backend',
      status: optional ? 'warn' : 'fail',
      detail: `${p.backend}${p.library} unavailable: ${p.reason ?? 'no reason given'}${optional ? ' (agent.prevent_sleep is off: keys are wiped only by their TTL)' : ''}`,
      // Without a backend the other way out is to run unprotected on purpose: say how, and what it costs.
      fix: optional
        ? p.fixBackend
        : `${p.fixBackend}; or, to run without suspend protection (keys then wiped only by their TTL), set agent.prevent_sleep = false in the config file, which makes this a warning`,
    },
    { section: 'suspend', name: 'delay lock', status: 'info', detail: skipped },
    { section: 'suspend', name: 'block lock', status: 'info', detail: skipped },
    { section: 'suspend', name: 'suspend listener', status: 'info', detail: skipped },
  ];
}

/** The delay lock, which holds a suspend back until the keys are wiped. */
function delayLockCheck(p: PowerFacts): DoctorCheck {
  const delay = obj(p.power.delayLock);
  return delay.held === true
    ? { section: 'suspend', name: 'delay lock', status: 'ok', detail: 'held: suspend waits until the keys are wiped' }
    : {
        section: 'suspend',
        name: 'delay lock',
        status: 'fail',
        detail: `not held: ${String(delay.reason ?? p.reason ?? 'unknown')}`,
        fix: p.fixBackend,
      };
}

/** The block lock, taken while an activity runs; none is needed when idle or with agent.prevent_sleep off. */
function blockLockCheck(p: PowerFacts): DoctorCheck {
  const block = obj(p.power.blockLock);
  const kinds = Array.isArray(block.kinds) ? (block.kinds as string[]) : [];
  if (p.sleepAllowed)
    return { section: 'suspend', name: 'block lock', status: 'info', detail: 'not used: agent.prevent_sleep is off' };
  if (block.held === true)
    return { section: 'suspend', name: 'block lock', status: 'ok', detail: `held for: ${kinds.join(', ')}` };
  if (block.reason) {
    return {
      section: 'suspend',
      name: 'block lock',
      status: 'fail',
      detail: `cannot be taken: ${String(block.reason)}`,
      fix: p.fixBackend,
    };
  }
  return {
    section: 'suspend',
    name: 'block lock',
    status: 'ok',
    detail: 'not needed now (no activity; a pending clipboard clear takes none); taken while one runs',
  };
}

/** The listener that wipes the keys when the machine suspends. */
function listenerCheck(p: PowerFacts): DoctorCheck {
  const listener = String(p.power.listener ?? 'stopped');
  return listener === 'running'
    ? {
        section: 'suspend',
        name: 'suspend listener',
        status: 'ok',
        detail: 'running: keys are wiped when the machine suspends',
      }
    : {
        section: 'suspend',
        name: 'suspend listener',
        status: 'fail',
        detail: `${listener}${p.reason ? `: ${p.reason}` : ''}`,
        fix: p.fixBackend,
      };
}

/**
 * Inhibitor backend, delay lock, block lock, suspend listener (from the
 * agent's power status). One cause gives one failing line with its fix: the
 * checks that depend on it say "skipped: <cause>". A machine that cannot
 * suspend needs no protection ([info]); with agent.prevent_sleep off a
 * missing backend is a warning (keys are then wiped only by their TTL), not a
 * failure.
 */
export function suspendChecks(status: Doc | null, capability: SuspendCapability = suspendCapability()): DoctorCheck[] {
  if (!status) return suspendInfo('skipped: the agent is not running (see Session agent above)');
  const p = powerFacts(status);
  if (p.power.available !== true) {
    if (!capability.canSuspend) {
      return suspendInfo(
        `not needed: this machine cannot suspend (${capability.why}), so no key has to be wiped before a suspend`,
      );
    }
    return backendMissingChecks(p);
  }
  return [
    { section: 'suspend', name: 'inhibitor backend', status: 'ok', detail: `${p.backend}${p.library}` },
    delayLockCheck(p),
    blockLockCheck(p),
    listenerCheck(p),
  ];
}

/** The config file in use and each effective setting with where it came from. */
export async function configChecks(agentStatusDoc: Doc | null): Promise<{ checks: DoctorCheck[]; config: Doc | null }> {
  const section = 'config' as const;
  const [{ agentSettings }, { configPath }] = await Promise.all([
    import('../agent/config.js'),
    import('../config/app-config.js'),
  ]);
  let config;
  try {
    // The agent's own check, environment values included: what fails here keeps an agent from starting.
    ({ config } = await agentSettings());
  } catch (err) {
    const message = errorMessage(err);
    const variable = /^(STASH_[A-Z_]+) /.exec(message)?.[1];
    const fix = variable
      ? `set ${variable} to a valid value or unset it (see docs/configuration.md)`
      : `correct ${configPath().path} (see docs/configuration.md)`;
    return { checks: [{ section, name: 'config file', status: 'fail', detail: message, fix }], config: null };
  }
  const checks: DoctorCheck[] = [
    {
      section,
      name: 'config file',
      status: 'ok',
      detail: `${config.path} (${config.pathSource === 'default' ? 'default location' : `from ${config.pathSource}`}; ${config.fileFound ? 'found' : 'not present, defaults apply'})`,
    },
  ];
  const settings = [
    ['agent.prevent_sleep', config.preventSleep],
    ['agent.terminate_on_suspend', config.terminateOnSuspend],
    ['agent.lock_on_screen_lock', config.lockOnScreenLock],
    ['cli.clip_seconds', config.clipSeconds],
    ['cli.default_container', config.defaultContainer],
    ['vault.history_keep', config.historyKeep],
    ['key_server_url', config.keyServerUrl],
  ] as const;
  for (const [key, s] of settings) {
    const from = s.source === 'default' ? 'default' : `${s.source}: ${s.from}`;
    checks.push({ section, name: key, status: 'info', detail: `${JSON.stringify(s.value)} (${from})` });
  }
  const running = obj(obj(agentStatusDoc?.config));
  const lockOn = obj(agentStatusDoc?.sessionLock).enabled;
  const differs =
    agentStatusDoc !== null &&
    (agentStatusDoc.preventSleep !== config.preventSleep.value ||
      agentStatusDoc.terminateOnSuspend !== config.terminateOnSuspend.value ||
      (typeof lockOn === 'boolean' && lockOn !== config.lockOnScreenLock.value));
  if (differs) {
    checks.push({
      section,
      name: 'running agent',
      status: 'warn',
      detail: `the running agent uses other settings (its config: ${String(running.path ?? '?')})`,
      fix: 'restart it to apply the current ones: stash vault sessions stop',
    });
  }
  const json = {
    path: config.path,
    pathSource: config.pathSource,
    fileFound: config.fileFound,
    settings: Object.fromEntries(settings.map(([k, s]) => [k, { value: s.value, source: s.source, from: s.from }])),
  };
  return { checks, config: json };
}
