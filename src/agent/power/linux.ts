/**
 * Linux: systemd-logind (or elogind) on the system bus.
 *
 * - delay lock: Inhibit("sleep", who, ..., "delay") held whenever the system is
 *   awake; logind then waits (up to InhibitDelayMaxSec, 5 s by default) after
 *   sending PrepareForSleep(true) until the fd is closed.
 * - block lock: Inhibit("sleep", who, kinds, "block") while activities run.
 * - listener: a native thread with its own bus connection that reports
 *   PrepareForSleep from the current owner of org.freedesktop.login1 only, and
 *   owner changes (a logind restart drops every inhibitor, so both locks are
 *   taken again from the new owner).
 */
import { errorMessage } from '../../errors.js';
import {
  powerInhibit,
  powerProbe,
  powerRelease,
  watchPower,
  type NativePowerEvent,
  type NativePowerWatcher,
} from '../../native/power.js';
import { PowerIntegration, type PowerOptions } from './power-integration.js';

export class LogindPowerIntegration extends PowerIntegration {
  readonly backend = 'logind' as const;

  private watcher: NativePowerWatcher | null = null;
  /** logind's unique bus name; null while logind is not on the bus or the listener is down. */
  private owner: string | null = null;
  private delayFd: number | null = null;
  private delayReason: string | null = 'not taken yet';
  private delayAcquiring: { generation: number; done: Promise<void> } | null = null;
  private retryTimer: NodeJS.Timeout | null = null;
  private delayRetryTimer: NodeJS.Timeout | null = null;
  private delayRetryMs: number;
  private retryDelayMs: number;
  private firstAttempt: (() => void) | null = null;

  constructor(opts: PowerOptions = {}) {
    super(opts);
    this.retryDelayMs = this.opts.retryMinMs;
    this.delayRetryMs = this.opts.retryMinMs;
  }

  protected async open(): Promise<void> {
    // The probe names the library for status(); the bus itself is the watcher's business (it retries).
    const probe = await powerProbe();
    this.library = probe.library;
    if (this.stopped) return;
    await new Promise<void>((resolve) => {
      this.firstAttempt = resolve;
      this.startWatcher();
    });
  }

  protected close(): void {
    if (this.retryTimer) clearTimeout(this.retryTimer);
    this.retryTimer = null;
    this.cancelDelayRetry();
    this.watcher?.stop();
    this.watcher = null;
    this.releaseDelay();
    this.delayReason = 'stopped';
    this.settleFirstAttempt();
  }

  protected delayLockState(): { held: boolean; reason: string | null } {
    return { held: this.delayFd !== null, reason: this.delayReason };
  }

  protected canBlock(): boolean {
    return this.owner !== null && !this.stopped;
  }

  protected acquireBlock(why: string): Promise<number> {
    return powerInhibit({ what: 'sleep', who: this.opts.who, why, mode: 'block' });
  }

  protected releaseBlock(handle: number): void {
    powerRelease(handle);
  }

  protected override resumed(): void {
    void this.acquireDelay();
  }

  private settleFirstAttempt(): void {
    const resolve = this.firstAttempt;
    this.firstAttempt = null;
    resolve?.();
  }

  private startWatcher(): void {
    if (this.stopped) return;
    try {
      // Events from a watcher that was replaced or stopped are stale.
      const watcher: NativePowerWatcher = watchPower((event) => {
        if (this.watcher === watcher) this.onEvent(event);
      });
      this.watcher = watcher;
    } catch (err) {
      // No sd-bus library: nothing will change while the process lives, so no retry.
      this.available = false;
      this.listener = 'unavailable';
      this.reason = errorMessage(err);
      this.delayReason = this.reason;
      this.log('warning', `suspend protection unavailable: ${this.reason}`);
      this.settleFirstAttempt();
    }
  }

  private onEvent(event: NativePowerEvent): void {
    if (this.stopped) return;
    switch (event.type) {
      case 'ready':
        this.listener = 'running';
        this.retryDelayMs = this.opts.retryMinMs;
        this.setOwner(event.owner);
        break;
      case 'owner':
        this.log(
          'info',
          event.owner ? `logind is now ${event.owner}; taking the locks again` : 'logind left the system bus',
        );
        this.setOwner(event.owner);
        break;
      case 'sleep':
        if (event.start) void this.handleSleep(() => this.releaseDelay(), event.at);
        else this.handleResume();
        break;
      case 'ignored':
        this.log(
          'warning',
          `ignored PrepareForSleep from ${event.sender ?? 'an unknown sender'}, which does not own org.freedesktop.login1`,
        );
        break;
      case 'error':
        this.onWatcherError(`${event.message} (${event.code})`);
        break;
    }
  }

  /** A new logind (or none): whatever we held belonged to the previous one. */
  private setOwner(owner: string | null): void {
    const changed = owner !== this.owner;
    this.owner = owner;
    if (changed) this.invalidateLocks();
    if (owner === null) {
      this.available = false;
      this.reason = 'org.freedesktop.login1 is not on the system bus (systemd-logind/elogind not running)';
      this.delayReason = this.reason;
      this.settleFirstAttempt();
      return;
    }
    this.available = true;
    this.reason = null;
    // A new logind, or our listener back after losing the bus, while we think
    // the system sleeps: PrepareForSleep(false) was missed, and we are running,
    // so the system is awake. Without this the agent would refuse keys forever.
    if (changed && this.phase === 'sleeping') {
      this.log('warning', 'resume was not signalled (logind or the bus restarted); assuming the system is awake');
      this.handleResume();
    }
    const delay = this.acquireDelay();
    void this.reconcileBlock();
    void delay.then(() => this.settleFirstAttempt());
  }

  private invalidateLocks(): void {
    this.generation++;
    this.delayAcquiring = null;
    this.cancelDelayRetry();
    this.releaseDelay();
    this.dropBlock();
  }

  private onWatcherError(message: string): void {
    this.watcher?.stop();
    this.watcher = null;
    this.owner = null;
    this.invalidateLocks();
    this.available = false;
    this.listener = 'unavailable';
    this.reason = message;
    this.delayReason = message;
    this.log('warning', `suspend listener stopped: ${message}; retrying in ${this.retryDelayMs} ms`);
    this.settleFirstAttempt();
    this.retryTimer = setTimeout(() => {
      this.retryTimer = null;
      this.startWatcher();
    }, this.retryDelayMs);
    // Retrying must not keep an otherwise finished agent alive.
    this.retryTimer.unref();
    this.retryDelayMs = Math.min(this.retryDelayMs * 2, this.opts.retryMaxMs);
  }

  private acquireDelay(): Promise<void> {
    if (this.delayFd !== null || this.owner === null || this.stopped) return Promise.resolve();
    if (this.delayAcquiring && this.delayAcquiring.generation === this.generation) return this.delayAcquiring.done;
    const generation = this.generation;
    const done = (async () => {
      try {
        const fd = await powerInhibit({
          what: 'sleep',
          who: this.opts.who,
          why: 'wipe cached keys before sleep',
          mode: 'delay',
        });
        // Taken for a logind that is gone, after stop(), or while a suspend is
        // under way (logind is not waiting for a lock it did not see): let go.
        if (generation !== this.generation || this.stopped || this.phase !== 'idle' || this.delayFd !== null) {
          powerRelease(fd);
        } else {
          this.delayFd = fd;
          this.delayReason = null;
          this.delayRetryMs = this.opts.retryMinMs;
        }
      } catch (err) {
        if (generation === this.generation && !this.stopped) {
          this.delayReason = errorMessage(err);
          this.log(
            'error',
            `could not take the sleep delay lock: ${this.delayReason}; retrying in ${this.delayRetryMs} ms`,
          );
          this.scheduleDelayRetry();
        }
      } finally {
        if (this.delayAcquiring?.generation === generation) this.delayAcquiring = null;
      }
    })();
    this.delayAcquiring = { generation, done };
    return done;
  }

  private scheduleDelayRetry(): void {
    if (this.delayRetryTimer) return;
    this.delayRetryTimer = setTimeout(() => {
      this.delayRetryTimer = null;
      if (this.phase === 'idle') void this.acquireDelay();
    }, this.delayRetryMs);
    this.delayRetryTimer.unref();
    this.delayRetryMs = Math.min(this.delayRetryMs * 2, this.opts.retryMaxMs);
  }

  private cancelDelayRetry(): void {
    if (this.delayRetryTimer) clearTimeout(this.delayRetryTimer);
    this.delayRetryTimer = null;
  }

  private releaseDelay(): void {
    const fd = this.delayFd;
    // Forget the number before closing it: once closed, the kernel may hand it to anyone.
    this.delayFd = null;
    this.delayReason = this.phase === 'idle' ? 'released' : 'released for suspend';
    if (fd !== null) {
      try {
        powerRelease(fd);
      } catch (err) {
        this.log('error', `closing the delay lock fd failed: ${errorMessage(err)}`);
      }
    }
  }
}
