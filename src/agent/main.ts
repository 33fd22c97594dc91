/**
 * `stash __agent`: the agent process. Hardens itself, claims the socket,
 * serves until stopped, idle, signalled, or dispossessed of its socket, and
 * wipes every key on the way out.
 */
import { unlinkSync } from 'node:fs';
import type { Socket } from 'node:net';
import { errorMessage } from '../errors.js';
import { Agent, type Activities } from './agent.js';
import { KeyCache } from './cache.js';
import type { StashConfig } from '../config/app-config.js';
import { agentSettings } from './config.js';
import { AgentConnection } from './connection.js';
import { MAX_CONNECTIONS, MAX_ENTRIES } from './limits.js';
import { AgentRunningError, claimEndpoint, stillOurs } from './listener.js';
import type { SessionLockIntegration } from './lock/index.js';
import { createLogger, type Level, type Logger } from './log.js';
import { agentEndpoint, type Endpoint, ensureAgentDir } from './paths.js';
import type { PowerIntegration } from './power/index.js';

/** What claimEndpoint gives: the listener and the socket file's inode (null for a pipe). */
type Claimed = Awaited<ReturnType<typeof claimEndpoint>>;

/** The agent log's one call: a level and a line. */
type Log = (level: Level, message: string) => void;
/** Logs `message`, says it on stderr and exits with `status`. */
type Fatal = (message: string, status: number) => never;

/** What the steps of a running agent share. */
interface Running {
  log: Log;
  logger: Logger;
  endpoint: Endpoint;
  agent: Agent;
  power: PowerIntegration;
  sessionLock: SessionLockIntegration;
  connections: Set<AgentConnection>;
  /** Rounds of the periodic check (expiry, dead activities, the socket file, the idle exit) run so far. */
  rounds: number;
}

/** Who may connect: our uid, read from each peer by the addon; null without uids (Windows: the pipe checks the SID). */
interface PeerCheck {
  uid: number;
  native: typeof import('../native/index.js');
}

function describeSetting(s: StashConfig['preventSleep']): Record<string, unknown> {
  return { value: s.value, source: s.source, from: s.from };
}

/** Runs the agent: set up, claim the endpoint, serve; it ends by itself (stop, idle, signal, a lost socket). */
export async function runAgentProcess(argv: string[]): Promise<void> {
  if (argv.length > 0) {
    process.stderr.write(`stash: __agent takes no arguments (got ${argv[0]})\n`);
    process.exit(64);
  }
  const logger = await openLogger();
  const log: Log = (level, message) => logger.log(level, message);
  const fatal: Fatal = (message, status) => {
    log('error', message);
    process.stderr.write(`stash agent: ${message}\n`);
    process.exit(status);
  };
  const posture = await harden(log);
  const { config, idleMs: idle, connectionIdleMs: connectionIdle } = await loadSettings(fatal);
  const endpoint = readyEndpoint(fatal);
  // The periodic check's pace and the rounds run so far are in the status, so that a test can wait
  // for rounds of it instead of sleeping; so is the count of open connections.
  const describe = (): Record<string, unknown> => ({
    socket: endpoint.path,
    socketSource: endpoint.source,
    log: logger.target,
    idleExitSeconds: idle / 1000,
    housekeeping: { intervalMs: housekeepingTick(idle), rounds: run.rounds },
    connections: run.connections.size,
    maxEntries: MAX_ENTRIES,
    posture,
    config: describeConfig(config),
  });
  const run: Running = {
    log,
    logger,
    endpoint,
    connections: new Set(),
    rounds: 0,
    ...(await buildAgent(config, log, describe)),
  };
  const peers = await peerCheck(fatal);
  const claimed = await listen(
    run,
    (socket, pipePeerPid) => accept(run, peers, connectionIdle, socket, pipePeerPid),
    fatal,
  );
  const shutdown = shutdownOnce(run, claimed);
  run.agent.onStop(() => shutdown('stop requested'));
  for (const sig of ['SIGTERM', 'SIGINT', 'SIGHUP'] as const) process.on(sig, () => shutdown(sig));
  process.on('uncaughtException', (err) => {
    log('error', `unexpected error: ${errorMessage(err)}`);
    shutdown('unexpected error', 70);
  });
  startPower(run);
  run.sessionLock.start({ onLock: () => run.agent.sessionLocked(), log });
  exitWhenIdle(run, claimed, idle, shutdown);
  log('info', `agent started (pid ${process.pid}, socket ${endpoint.path}, log ${logger.target})`);
}

/** The agent's log; without one there is nowhere to tell of trouble later, so the process ends (status 70). */
async function openLogger(): Promise<Logger> {
  try {
    return await createLogger();
  } catch (err) {
    process.stderr.write(`stash agent: cannot open its log: ${errorMessage(err)}\n`);
    process.exit(70);
  }
}

/** Hardens the process (no core file, not dumpable); what it did, for the status reply. A failure is logged, not fatal. */
async function harden(log: Log): Promise<Record<string, unknown>> {
  try {
    const { hardenProcess } = await import('../native/index.js');
    const report = hardenProcess();
    return { hardened: true, dumpable: report.dumpable, actions: report.actions, memlockLimit: report.memlockLimit };
  } catch (err) {
    log('warning', `process hardening failed: ${errorMessage(err)}`);
    return { hardened: false, error: errorMessage(err) };
  }
}

/** The agent's settings, by the same check the CLI runs before starting an agent (autostart.ts); status 78 when wrong. */
async function loadSettings(fatal: Fatal): Promise<Awaited<ReturnType<typeof agentSettings>>> {
  try {
    return await agentSettings();
  } catch (err) {
    return fatal(errorMessage(err), 78);
  }
}

/** Where to listen, its private folder made sure of (Unix); status 77 when the folder is not safe. */
function readyEndpoint(fatal: Fatal): Endpoint {
  const endpoint = agentEndpoint();
  try {
    if (endpoint.dir) ensureAgentDir({ dir: endpoint.dir, source: endpoint.source });
  } catch (err) {
    return fatal(errorMessage(err), 77);
  }
  return endpoint;
}

/** The settings in force and where each came from, for the status reply. */
function describeConfig(config: StashConfig): Record<string, unknown> {
  return {
    path: config.path,
    pathSource: config.pathSource,
    fileFound: config.fileFound,
    preventSleep: describeSetting(config.preventSleep),
    terminateOnSuspend: describeSetting(config.terminateOnSuspend),
    lockOnScreenLock: describeSetting(config.lockOnScreenLock),
  };
}

/** The agent with its cache, activity registry, power and session-lock integrations, none started yet. */
async function buildAgent(
  config: StashConfig,
  log: Log,
  describe: () => Record<string, unknown>,
): Promise<Pick<Running, 'agent' | 'power' | 'sessionLock'>> {
  const cache = new KeyCache(MAX_ENTRIES);
  let agent: Agent | null = null;
  const { ActivityRegistry } = await import('./activities.js');
  const activities: Activities = new ActivityRegistry({
    onChange: (kinds: string[]) => agent?.activitiesChanged(kinds),
  });
  // Never throws: without the addon, a bus or logind it is a no-op whose status says why.
  const { createPowerIntegration } = await import('./power/index.js');
  const power = createPowerIntegration();
  // Never throws either: a missing bus, session or screensaver shows in its status.
  const { createSessionLock } = await import('./lock/index.js');
  const sessionLock = createSessionLock({ enabled: config.lockOnScreenLock.value });
  agent = new Agent({
    cache,
    activities,
    power,
    sessionLock,
    preventSleep: config.preventSleep.value,
    terminateOnSuspend: config.terminateOnSuspend.value,
    log,
    describe,
  });
  return { agent, power, sessionLock };
}

/** Our uid and the addon to read each peer's with; the process ends (status 70) when there is a uid but no addon. */
async function peerCheck(fatal: Fatal): Promise<PeerCheck | null> {
  const uid = typeof process.getuid === 'function' ? process.getuid() : null;
  if (uid === null) return null;
  try {
    return { uid, native: await import('../native/index.js') };
  } catch (err) {
    return fatal(`cannot check peer credentials without the native addon: ${errorMessage(err)}`, 70);
  }
}

/** The pid of a peer that runs as our uid; undefined once any other peer is logged and its socket destroyed. */
function peerPidOf(socket: Socket, peers: PeerCheck, log: Log): number | undefined {
  try {
    const cred = peers.native.peerCredentials(socket);
    if (cred.uid !== peers.uid) {
      log(
        'warning',
        `refused a connection from uid ${cred.uid} (pid ${cred.pid}); only uid ${peers.uid} may use this agent`,
      );
      socket.destroy();
      return undefined;
    }
    return cred.pid;
  } catch (err) {
    log('error', `refused a connection: peer credentials unavailable (${errorMessage(err)})`);
    socket.destroy();
    return undefined;
  }
}

/**
 * Serves a new connection from our own user, up to MAX_CONNECTIONS at once, each closed when idle.
 * pipePeerPid (Windows): the client pid the addon read from the pipe, after it
 * checked that the client runs as our user (SID), so no uid check follows.
 */
function accept(run: Running, peers: PeerCheck | null, idleMs: number, socket: Socket, pipePeerPid?: number): void {
  run.agent.housekeeping();
  let peerPid: number | null = pipePeerPid ?? null;
  if (peers !== null) {
    const pid = peerPidOf(socket, peers, run.log);
    if (pid === undefined) return;
    peerPid = pid;
  }
  if (run.connections.size >= MAX_CONNECTIONS) {
    run.log('warning', `refused a connection: ${MAX_CONNECTIONS} already open`);
    socket.destroy();
    return;
  }
  socket.setTimeout(idleMs, () => socket.destroy());
  const conn = new AgentConnection(socket, peerPid, run.agent);
  run.connections.add(conn);
  socket.on('close', () => run.connections.delete(conn));
}

/** Claims the endpoint; the process ends quietly when another agent won the race, with status 69 when it cannot listen. */
async function listen(
  run: Running,
  onConnection: (socket: Socket, pipePeerPid?: number) => void,
  fatal: Fatal,
): Promise<Claimed> {
  try {
    return await claimEndpoint(run.endpoint.path, onConnection, (pid, reason) =>
      run.log('warning', `refused a pipe client (pid ${pid}): ${reason}`),
    );
  } catch (err) {
    if (err instanceof AgentRunningError) process.exit(0); // another agent won the race
    return fatal(`cannot listen on ${run.endpoint.path}: ${errorMessage(err)}`, 69);
  }
}

/** The one way out: wipes every key, stops the integrations, closes connections and the socket (if still ours), exits. */
function shutdownOnce(run: Running, claimed: Claimed): (why: string, status?: number) => void {
  let shuttingDown = false;
  return (why, status = 0) => {
    if (shuttingDown) return;
    shuttingDown = true;
    const wiped = run.agent.wipeAll();
    run.power.stop();
    run.sessionLock.stop();
    run.logger.flush?.();
    run.log('info', `agent exiting (${why}); wiped ${wiped} key(s)`);
    for (const c of run.connections) c.close();
    claimed.server.close();
    if (stillOurs(run.endpoint.path, claimed.inode)) {
      try {
        unlinkSync(run.endpoint.path);
      } catch {
        /* already gone */
      }
    }
    setTimeout(() => process.exit(status), 50).unref();
  };
}

/** Starts suspend protection in the background; whether it is active, or why not, goes to the log. */
function startPower(run: Running): void {
  const { agent, power, log } = run;
  void power
    .start({
      beforeSleep: () => agent.beforeSleep(),
      afterResume: () => agent.afterResume(),
      log,
    })
    .then(() => {
      const s = power.status();
      if (!s.available) log('warning', `suspend protection unavailable: ${s.reason ?? 'unknown reason'}`);
      else log('info', `suspend protection active (${s.backend}, ${s.library ?? 'native'})`);
    })
    .catch((err: unknown) => log('warning', `suspend protection unavailable: ${errorMessage(err)}`));
}

/** The periodic check's pace: four rounds per idle time, between 50 ms and 1 s. */
function housekeepingTick(idle: number): number {
  return Math.min(1000, Math.max(50, idle / 4));
}

/** Housekeeping on a tick; shuts down once idle for `idle` ms, or at once when the socket file is no longer ours. */
function exitWhenIdle(run: Running, claimed: Claimed, idle: number, shutdown: (why: string) => void): void {
  let idleSince = Date.now();
  setInterval(() => {
    run.rounds++;
    run.agent.housekeeping();
    if (!stillOurs(run.endpoint.path, claimed.inode)) return shutdown('socket file removed or replaced');
    // An open connection is a command at work (between its first miss and its put, say): not idle either.
    if (!run.agent.idle() || run.connections.size > 0) idleSince = Date.now();
    else if (Date.now() - idleSince >= idle) shutdown(`idle for ${Math.round(idle / 1000)} s`);
  }, housekeepingTick(idle));
}
