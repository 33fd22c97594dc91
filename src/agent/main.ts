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
import { createLogger, type Logger } from './log.js';
import { agentEndpoint, ensureAgentDir } from './paths.js';

function describeSetting(s: StashConfig['preventSleep']): Record<string, unknown> {
  return { value: s.value, source: s.source, from: s.from };
}

export async function runAgentProcess(argv: string[]): Promise<void> {
  if (argv.length > 0) {
    process.stderr.write(`stash: __agent takes no arguments (got ${argv[0]})\n`);
    process.exit(64);
  }
  let logger: Logger;
  try {
    logger = await createLogger();
  } catch (err) {
    process.stderr.write(`stash agent: cannot open its log: ${errorMessage(err)}\n`);
    process.exit(70);
  }
  const log = (level: 'info' | 'warning' | 'error', message: string): void => logger.log(level, message);
  const fatal = (message: string, status: number): never => {
    log('error', message);
    process.stderr.write(`stash agent: ${message}\n`);
    process.exit(status);
  };

  let posture: Record<string, unknown> = { hardened: false };
  try {
    const { hardenProcess } = await import('../native/index.js');
    const report = hardenProcess();
    posture = { hardened: true, dumpable: report.dumpable, actions: report.actions, memlockLimit: report.memlockLimit };
  } catch (err) {
    log('warning', `process hardening failed: ${errorMessage(err)}`);
    posture = { hardened: false, error: errorMessage(err) };
  }

  let config: StashConfig;
  let idle: number;
  let connectionIdle: number;
  try {
    // The same check the CLI runs before starting an agent (autostart.ts).
    ({ config, idleMs: idle, connectionIdleMs: connectionIdle } = await agentSettings());
  } catch (err) {
    return fatal(errorMessage(err), 78);
  }

  const endpoint = agentEndpoint();
  try {
    if (endpoint.dir) ensureAgentDir({ dir: endpoint.dir, source: endpoint.source });
  } catch (err) {
    return fatal(errorMessage(err), 77);
  }

  // The periodic check (expiry, dead activities, the socket file, the idle exit): its pace, and the rounds run
  // so far, in the status, so that a test can wait for rounds of it instead of sleeping.
  const tick = Math.min(1000, Math.max(50, idle / 4));
  let rounds = 0;

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
    describe: () => ({
      socket: endpoint.path,
      socketSource: endpoint.source,
      log: logger.target,
      idleExitSeconds: idle / 1000,
      housekeeping: { intervalMs: tick, rounds },
      connections: connections.size,
      maxEntries: MAX_ENTRIES,
      posture,
      config: {
        path: config.path,
        pathSource: config.pathSource,
        fileFound: config.fileFound,
        preventSleep: describeSetting(config.preventSleep),
        terminateOnSuspend: describeSetting(config.terminateOnSuspend),
        lockOnScreenLock: describeSetting(config.lockOnScreenLock),
      },
    }),
  });
  const theAgent = agent;

  const connections = new Set<AgentConnection>();
  const uid = typeof process.getuid === 'function' ? process.getuid() : null;
  let native: typeof import('../native/index.js') | null = null;
  if (uid !== null) {
    try {
      native = await import('../native/index.js');
    } catch (err) {
      return fatal(`cannot check peer credentials without the native addon: ${errorMessage(err)}`, 70);
    }
  }
  // pipePeerPid (Windows): the client pid the addon read from the pipe, after it
  // checked that the client runs as our user (SID), so no uid check follows.
  const onConnection = (socket: Socket, pipePeerPid?: number): void => {
    theAgent.housekeeping();
    let peerPid: number | null = pipePeerPid ?? null;
    if (uid !== null && native) {
      try {
        const cred = native.peerCredentials(socket);
        if (cred.uid !== uid) {
          log(
            'warning',
            `refused a connection from uid ${cred.uid} (pid ${cred.pid}); only uid ${uid} may use this agent`,
          );
          socket.destroy();
          return;
        }
        peerPid = cred.pid;
      } catch (err) {
        log('error', `refused a connection: peer credentials unavailable (${errorMessage(err)})`);
        socket.destroy();
        return;
      }
    }
    if (connections.size >= MAX_CONNECTIONS) {
      log('warning', `refused a connection: ${MAX_CONNECTIONS} already open`);
      socket.destroy();
      return;
    }
    socket.setTimeout(connectionIdle, () => socket.destroy());
    const conn = new AgentConnection(socket, peerPid, theAgent);
    connections.add(conn);
    socket.on('close', () => connections.delete(conn));
  };

  let claimed: Awaited<ReturnType<typeof claimEndpoint>>;
  try {
    claimed = await claimEndpoint(endpoint.path, onConnection, (pid, reason) =>
      log('warning', `refused a pipe client (pid ${pid}): ${reason}`),
    );
  } catch (err) {
    if (err instanceof AgentRunningError) process.exit(0); // another agent won the race
    return fatal(`cannot listen on ${endpoint.path}: ${errorMessage(err)}`, 69);
  }

  let shuttingDown = false;
  const shutdown = (why: string, status = 0): void => {
    if (shuttingDown) return;
    shuttingDown = true;
    const wiped = theAgent.wipeAll();
    power.stop();
    sessionLock.stop();
    logger.flush?.();
    log('info', `agent exiting (${why}); wiped ${wiped} key(s)`);
    for (const c of connections) c.close();
    claimed.server.close();
    if (stillOurs(endpoint.path, claimed.inode)) {
      try {
        unlinkSync(endpoint.path);
      } catch {
        /* already gone */
      }
    }
    setTimeout(() => process.exit(status), 50).unref();
  };
  theAgent.onStop(() => shutdown('stop requested'));
  for (const sig of ['SIGTERM', 'SIGINT', 'SIGHUP'] as const) process.on(sig, () => shutdown(sig));
  process.on('uncaughtException', (err) => {
    log('error', `unexpected error: ${errorMessage(err)}`);
    shutdown('unexpected error', 70);
  });

  void power
    .start({
      beforeSleep: () => theAgent.beforeSleep(),
      afterResume: () => theAgent.afterResume(),
      log,
    })
    .then(() => {
      const s = power.status();
      if (!s.available) log('warning', `suspend protection unavailable: ${s.reason ?? 'unknown reason'}`);
      else log('info', `suspend protection active (${s.backend}, ${s.library ?? 'native'})`);
    })
    .catch((err: unknown) => log('warning', `suspend protection unavailable: ${errorMessage(err)}`));

  sessionLock.start({ onLock: () => theAgent.sessionLocked(), log });

  let idleSince = Date.now();
  setInterval(() => {
    rounds++;
    theAgent.housekeeping();
    if (!stillOurs(endpoint.path, claimed.inode)) return shutdown('socket file removed or replaced');
    // An open connection is a command at work (between its first miss and its put, say): not idle either.
    if (!theAgent.idle() || connections.size > 0) idleSince = Date.now();
    else if (Date.now() - idleSince >= idle) shutdown(`idle for ${Math.round(idle / 1000)} s`);
  }, tick);

  log('info', `agent started (pid ${process.pid}, socket ${endpoint.path}, log ${logger.target})`);
}
