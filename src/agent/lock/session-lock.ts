/**
 * Wipe the keys when the user's session locks (docs/suspend.md, "Session lock").
 *
 * Every lock source of the platform (./index.ts picks them) reports locks and
 * unlocks; one flag holds the result: any lock locks, any unlock unlocks.
 * Desktops differ in what they send (GNOME Shell: org.gnome.ScreenSaver
 * ActiveChanged and LockedHint, but no Unlock signal; `loginctl lock-session`:
 * logind's Lock; KDE: org.freedesktop.ScreenSaver), so no single source is
 * required to confirm the other. The lock wipes every cached key on the JS
 * thread before anything else runs, and until the unlock `locked` is true: the
 * agent refuses to cache keys then, so a key whose PUT raced the lock is
 * either wiped by it (handled before) or refused (handled after), never kept.
 */
import { errorMessage } from '../../errors.js';
import type { LockSourceName, NativeLockEvent } from '../../native/session-lock.js';
import { LockSource, type LockSourceStatus } from './source.js';

export type { LockSourceStatus } from './source.js';

export interface SessionLockHooks {
  /** The session locked: wipe every cached key now (synchronously); returns how many there were. */
  onLock(): number;
  log?(level: 'info' | 'warning' | 'error', message: string): void;
}

export interface SessionLockStatus {
  /** agent.lock_on_screen_lock. */
  enabled: boolean;
  /** Why nothing is watched, when nothing is (the setting is off, the platform has no source, no addon). */
  reason: string | null;
  locked: boolean;
  /** The source and signal that locked it, while locked. */
  lockedBy: { source: string; signal: string } | null;
  sources: LockSourceStatus[];
  /** Latency from the moment the signal was read off the bus (or reached JS, where the OS gives no time). */
  lastLock: { at: string; source: string; signal: string; wiped: number; wipeLatencyMs: number } | null;
  lockCount: number;
  /** Signals not believed: their sender does not own the name they speak for. */
  ignored: number;
}

export interface SessionLockOptions {
  sources: LockSourceName[];
  /** Set when `sources` is empty: why. */
  reason?: string | null;
  enabled?: boolean;
  /** Linux: XDG_SESSION_ID, for when logind knows no session for the agent's pid. */
  sessionId?: string | null;
  /** Listener restart backoff: first and largest delay. Default 1 s, 60 s. */
  retryMinMs?: number;
  retryMaxMs?: number;
  /** macOS: main run loop service interval. Default null (not serviced). */
  pumpMs?: number | null;
}

const nowUs = (): number => Number(process.hrtime.bigint() / 1000n);

export class SessionLockIntegration {
  private readonly sources: LockSource[];
  private hooks: SessionLockHooks | null = null;
  private isLocked = false;
  private lockedBy: SessionLockStatus['lockedBy'] = null;
  private lastLock: SessionLockStatus['lastLock'] = null;
  private lockCount = 0;
  private ignored = 0;
  private started = false;

  constructor(private readonly opts: SessionLockOptions) {
    this.sources = opts.sources.map(
      (name) =>
        new LockSource(name, {
          sessionId: opts.sessionId ?? null,
          retryMinMs: opts.retryMinMs ?? 1000,
          retryMaxMs: opts.retryMaxMs ?? 60_000,
          pumpMs: opts.pumpMs ?? null,
          onEvent: (event) => this.onEvent(event),
          log: (level, message) => this.log(level, message),
        }),
    );
  }

  /** True from a lock until the next unlock: the agent must not cache keys then. */
  get locked(): boolean {
    return this.isLocked;
  }

  /** Starts every source; never throws (a missing facility shows in status()). */
  start(hooks: SessionLockHooks): void {
    if (this.started) return;
    this.started = true;
    this.hooks = hooks;
    if (this.sources.length === 0 && this.opts.reason)
      this.log('info', `session lock not watched: ${this.opts.reason}`);
    for (const s of this.sources) s.start();
  }

  stop(): void {
    for (const s of this.sources) s.stop();
  }

  status(): SessionLockStatus {
    return {
      enabled: this.opts.enabled ?? true,
      reason: this.sources.length === 0 ? (this.opts.reason ?? 'no lock source') : null,
      locked: this.isLocked,
      lockedBy: this.lockedBy ? { ...this.lockedBy } : null,
      sources: this.sources.map((s) => s.status()),
      lastLock: this.lastLock ? { ...this.lastLock } : null,
      lockCount: this.lockCount,
      ignored: this.ignored,
    };
  }

  private log(level: 'info' | 'warning' | 'error', message: string): void {
    try {
      this.hooks?.log?.(level, message);
    } catch {
      // A failing logger must not break the lock path.
    }
  }

  private onEvent(event: NativeLockEvent): void {
    switch (event.type) {
      case 'ready':
        // The state when the listener (re)started: a lock seen now counts; an
        // unlock counts only against a lock this same source reported (it may
        // have been missed while the listener was down), never another's.
        if (event.locked === true) this.lock(event.source, 'locked when watching started', 0);
        else if (event.locked === false && this.lockedBy?.source === event.source)
          this.unlock(event.source, 'unlocked when watching started again');
        break;
      case 'lock':
        if (event.locked) this.lock(event.source, event.signal, event.at);
        else this.unlock(event.source, event.signal);
        break;
      case 'ignored':
        this.ignored++;
        this.log(
          'warning',
          `ignored ${event.signal} from ${event.sender ?? 'an unknown sender'}: it does not own the name it speaks for`,
        );
        break;
      default:
        break;
    }
  }

  /** Wipes every key first, then records; a second lock while locked changes nothing. */
  private lock(source: string, signal: string, atUs: number): void {
    if (this.isLocked) return;
    const now = nowUs();
    const start = atUs > 0 && atUs <= now ? atUs : now;
    this.isLocked = true;
    this.lockedBy = { source, signal };
    let wiped = 0;
    try {
      wiped = this.hooks?.onLock() ?? 0;
    } catch (err) {
      this.log('error', `wiping keys on session lock failed: ${errorMessage(err)}`);
    }
    const wipeLatencyMs = Math.max(0, nowUs() - start) / 1000;
    this.lockCount++;
    this.lastLock = { at: new Date().toISOString(), source, signal, wiped, wipeLatencyMs };
    this.log(
      'info',
      `session locked (${source}: ${signal}): wiped ${wiped} key(s) ${wipeLatencyMs.toFixed(2)} ms after the signal; no key is cached until it is unlocked`,
    );
  }

  private unlock(source: string, signal: string): void {
    if (!this.isLocked) return;
    this.isLocked = false;
    this.lockedBy = null;
    this.log('info', `session unlocked (${source}: ${signal}): caching keys again`);
  }
}
