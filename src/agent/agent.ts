/**
 * The agent: cache + activities + power integration behind the request
 * handler that every connection calls. No I/O of its own beyond what its
 * parts do; the process wiring (socket, signals, exit) is in main.ts.
 */
import { securePool } from '../native/secure-pool.js';
import { listEntrySize, ProtocolError, type Reply, type Request } from '../protocol/index.js';
import { SUSPEND_CLEARED_KINDS } from './activities.js';
import type { KeyCache } from './cache.js';
import type { RequestHandler } from './connection.js';
import type { Level } from './log.js';

/** What the agent needs from the activity registry (src/agent/activities.ts). */
export interface Activities {
  register(peerPid: number, pid: number, kind: string): string;
  unregister(pid: number, token: string): void;
  list(): Array<{ pid: number; kind: string; ageMs: number }>;
  prune(): number;
  terminateAll(
    graceMs: number,
    only?: (kind: string) => boolean,
  ): Promise<{ terminated: number; killed: number; skipped: number; failed: number }>;
  readonly size: number;
  clear(): void;
}

/** What the agent needs from the power integration (src/agent/power/). */
export interface Power {
  /** True from the suspend signal until resume: no key may be cached then. */
  readonly suspending: boolean;
  setActivityInhibit(kinds: string[]): void;
  status(): Record<string, unknown> | object;
  stop(): void;
}

/** What the agent needs from the session lock integration (src/agent/lock/). */
export interface SessionLock {
  /** True from a session lock until the unlock: no key may be cached then. */
  readonly locked: boolean;
  status(): Record<string, unknown> | object;
}

export interface AgentOptions {
  cache: KeyCache;
  activities: Activities;
  power: Power | null;
  /** Null when the agent does not watch the session lock (tests that build an Agent by hand). */
  sessionLock?: SessionLock | null;
  preventSleep: boolean;
  terminateOnSuspend: boolean;
  /**
   * Grace between SIGTERM and SIGKILL on suspend; must fit the OS budget:
   * logind waits 5 s (InhibitDelayMaxSec), Windows about 2 s. Default:
   * defaultTerminateGraceMs().
   */
  terminateGraceMs?: number;
  log(level: Level, message: string): void;
  /** Extra fields for the status reply (config, posture, socket...). */
  describe(): Record<string, unknown>;
}

/** 1.5 s where logind grants 5 s; 0.8 s on Windows, whose suspend callback has about 2 s. */
export function defaultTerminateGraceMs(platform: NodeJS.Platform = process.platform): number {
  return platform === 'win32' ? 800 : 1500;
}

export class Agent implements RequestHandler {
  readonly startedAt = Date.now();
  private stopHandler: () => void = () => {};
  private lastActivityKinds: string[] = [];

  constructor(private readonly opts: AgentOptions) {}

  get cache(): KeyCache {
    return this.opts.cache;
  }

  get activities(): Activities {
    return this.opts.activities;
  }

  /**
   * Called by the registry whenever the set of active activities changes.
   * A pending clipboard clear (`form`) takes no block lock: it is ended on
   * suspend instead (SUSPEND_CLEARED_KINDS, docs/suspend.md).
   */
  activitiesChanged(kinds: string[]): void {
    this.lastActivityKinds = kinds;
    if (this.opts.power && this.opts.preventSleep)
      this.opts.power.setActivityInhibit(kinds.filter((k) => !SUSPEND_CLEARED_KINDS.has(k)));
  }

  onStop(handler: () => void): void {
    this.stopHandler = handler;
  }

  stopRequested(): void {
    this.stopHandler();
  }

  log(level: Level, message: string): void {
    this.opts.log(level, message);
  }

  /** True when there is nothing to protect: no keys and no activities. */
  idle(): boolean {
    return this.opts.cache.size === 0 && this.opts.activities.size === 0;
  }

  /** Periodic pruning of expired keys and dead activity processes. */
  housekeeping(): void {
    const expired = this.opts.cache.prune();
    if (expired > 0) this.log('info', `expired ${expired} cached key(s)`);
    this.opts.activities.prune();
  }

  /**
   * The suspend path: wipe every key first, then deal with activities. The
   * power integration releases its delay lock only after this settles.
   */
  async beforeSleep(): Promise<void> {
    const wiped = this.opts.cache.forgetAll();
    const grace = this.opts.terminateGraceMs ?? defaultTerminateGraceMs();
    // Without terminate-on-suspend, only the clipboard clears are ended: a clipboard holding a secret must not outlive the suspend.
    const r = await this.opts.activities.terminateAll(
      grace,
      this.opts.terminateOnSuspend ? undefined : (kind) => SUSPEND_CLEARED_KINDS.has(kind),
    );
    const counts = `${r.terminated} terminated, ${r.killed} killed, ${r.skipped} skipped${r.failed > 0 ? `, ${r.failed} could not be signalled (another user's process?)` : ''}`;
    const level = r.failed > 0 ? 'warning' : 'info';
    if (this.opts.terminateOnSuspend) {
      this.log(level, `suspend: wiped ${wiped} key(s); activities: ${counts}`);
    } else {
      this.opts.power?.setActivityInhibit([]);
      const ended = r.terminated + r.killed + r.skipped + r.failed > 0 ? `clipboard clears: ${counts}; ` : '';
      this.log(
        level,
        `suspend: wiped ${wiped} key(s); ${ended}${this.opts.activities.size} activit(ies) left running without a sleep inhibitor`,
      );
    }
  }

  /**
   * The session locked: the suspend path's wipe, activities left alone. Runs
   * on the JS thread like every request, so a PUT is handled wholly before it
   * (and wiped here) or after it (and refused while locked). Returns the count.
   */
  sessionLocked(): number {
    return this.opts.cache.forgetAll();
  }

  /** After resume: protect the activities that are still running again. */
  afterResume(): void {
    this.opts.activities.prune();
    const kinds = this.opts.activities.list().map((a) => a.kind);
    this.activitiesChanged(kinds);
  }

  /** Wipes all keys and forgets activities (without signalling them). */
  wipeAll(): number {
    const n = this.opts.cache.forgetAll();
    this.opts.activities.clear();
    return n;
  }

  /** Answers one request. A CACHE_KEY reply's key is in `keyMemory` (by default a secure pool view: wipe() it). */
  handle(req: Request, peerPid: number | null, _sealed = true, keyMemory = (n: number) => securePool.take(n)): Reply {
    this.opts.cache.prune();
    switch (req.type) {
      case 'get': {
        const hit = this.opts.cache.get(req.id, keyMemory);
        return hit ? { type: 'cache-key', key: hit.key, ttl: hit.ttl } : { type: 'cache-miss' };
      }
      case 'put':
        // Between the suspend wipe and resume, a new key would sleep in memory.
        if (this.opts.power?.suspending)
          throw new ProtocolError('SUSPENDING', 'the machine is going to sleep; keys are not cached until it resumes');
        // While the screen is locked, a key typed just before the lock must not outlive it.
        if (this.opts.sessionLock?.locked)
          throw new ProtocolError('SESSION_LOCKED', 'the session is locked; no key is cached until it is unlocked');
        this.opts.cache.put(req.id, req.key, req.path, req.ttl);
        return { type: 'ack', count: 1 };
      case 'forget':
        return { type: 'ack', count: this.opts.cache.forget(req.id) ? 1 : 0 };
      case 'forget-all': {
        const n = this.opts.cache.forgetAll();
        if (n > 0) this.log('info', `forgot all ${n} cached key(s) on request`);
        return { type: 'ack', count: n };
      }
      case 'list': {
        const all = this.opts.cache.list();
        return listPage(all, req.offset);
      }
      case 'stop':
        this.log('info', 'stop requested');
        return { type: 'ack', count: this.opts.cache.size };
      case 'status':
        return { type: 'status', status: this.status() };
      case 'register': {
        if (peerPid === null)
          throw new ProtocolError('ACTIVITY_REFUSED', "cannot verify the caller's process on this platform");
        // Like put: an activity started while the machine goes to sleep could be neither protected nor terminated.
        if (this.opts.power?.suspending)
          throw new ProtocolError(
            'SUSPENDING',
            'the machine is going to sleep; secret activities can be registered again after it resumes',
          );
        this.opts.activities.prune();
        const token = this.opts.activities.register(peerPid, req.pid, req.kind);
        this.log('info', `activity ${req.kind} registered for pid ${req.pid}`);
        return { type: 'token', token: Buffer.from(token, 'hex') };
      }
      case 'unregister':
        this.opts.activities.unregister(req.pid, req.token.toString('hex'));
        this.log('info', `activity of pid ${req.pid} unregistered`);
        return { type: 'ack', count: 1 };
      case 'hello':
        throw new ProtocolError('MALFORMED_FRAME', 'hello is handled by the connection');
    }
  }

  /** The diagnostics document (STATUS reply); never contains key bytes or tokens. */
  status(): Record<string, unknown> {
    return {
      pid: process.pid,
      protocol: 2,
      startedAt: new Date(this.startedAt).toISOString(),
      uptimeSeconds: Math.round((Date.now() - this.startedAt) / 1000),
      entries: this.opts.cache.size,
      activities: this.opts.activities.list(),
      activityKinds: this.lastActivityKinds,
      preventSleep: this.opts.preventSleep,
      terminateOnSuspend: this.opts.terminateOnSuspend,
      power: this.opts.power
        ? this.opts.power.status()
        : { backend: 'none', available: false, reason: 'power integration not started' },
      sessionLock: this.opts.sessionLock
        ? this.opts.sessionLock.status()
        : { enabled: false, reason: 'session lock integration not started', locked: false, sources: [] },
      ...this.opts.describe(),
    };
  }
}

const PAGE_BUDGET = 100 * 1024;

function listPage(all: ReturnType<KeyCache['list']>, offset: number): Reply {
  const entries = [];
  let bytes = 0;
  for (let i = offset; i < all.length; i++) {
    const e = all[i]!;
    const size = listEntrySize(e);
    if (bytes + size > PAGE_BUDGET) break;
    bytes += size;
    entries.push(e);
  }
  return { type: 'list', total: all.length, offset, entries };
}
