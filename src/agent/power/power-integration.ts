/**
 * The OS power integration of the session agent, shared part.
 *
 * Two locks protect the keys (docs/suspend.md):
 * - the delay lock: held all the time, so that on a suspend request the OS
 *   waits until the agent has wiped every key (Linux: a logind "delay"
 *   inhibitor fd; macOS: the unanswered kIOMessageSystemWillSleep; Windows:
 *   the suspend callback that has not returned yet);
 * - the block lock: held while secret activities run, so that the machine
 *   does not go to sleep under them (logind "block" inhibitor, IOPM assertion,
 *   power request).
 *
 * This class holds the policy every platform shares: the suspend sequence
 * (beforeSleep, then release, with timings), the resume sequence, and the
 * block-lock reconciliation. Subclasses (linux.ts, darwin.ts, win32.ts) supply
 * the OS primitives.
 */
import { errorMessage } from '../../errors.js';
import { PowerError } from './errors.js';

export type PowerBackend = 'logind' | 'iokit' | 'windows' | 'none';
export type LogLevel = 'info' | 'warning' | 'error';

export interface PowerHooks {
  /**
   * Called on a suspend request BEFORE the delay lock is released: the agent
   * wipes every key and handles activities (terminate with grace, or drop the
   * block lock with setActivityInhibit([])). The delay lock is released only
   * after the returned promise settles (even if it rejects), or after
   * `sleepTimeoutMs`, whichever comes first. Until afterResume, status().phase
   * is not 'idle': the agent must refuse to cache new keys in that window.
   */
  beforeSleep(): Promise<void>;
  /** Called after resume (PrepareForSleep(false) / HasPoweredOn / APMRESUMEAUTOMATIC). */
  afterResume?(): void;
  log?(level: LogLevel, message: string): void;
}

export interface PowerStatus {
  backend: PowerBackend;
  /** True when the OS facility answers (Linux: logind is on the bus and the listener runs). */
  available: boolean;
  /** Why not available (null when available). */
  reason: string | null;
  /** The loaded library (libsystemd.so.0, libelogind.so.0, IOKit, powrprof.dll) when known. */
  library: string | null;
  delayLock: { held: boolean; reason: string | null };
  blockLock: { held: boolean; kinds: string[]; reason: string | null };
  listener: 'running' | 'stopped' | 'unavailable';
  /** 'preparing': beforeSleep runs; 'sleeping': the delay lock was released, resume not seen yet. */
  phase: 'idle' | 'preparing' | 'sleeping';
  /** Latencies are measured from the moment the suspend signal was received. */
  lastSuspend: { at: string; wipeLatencyMs: number; releaseLatencyMs: number } | null;
  suspendCount: number;
}

export interface PowerOptions {
  /**
   * Longest wait for beforeSleep before the delay lock is released anyway.
   * logind waits InhibitDelayMaxSec (default 5 s), macOS 30 s, Windows ~2 s;
   * the wipe itself takes microseconds. Default: 4000 ms.
   */
  sleepTimeoutMs?: number;
  /** The `who` of the inhibitors (shown by `systemd-inhibit --list`). Default 'stash'. */
  who?: string;
  /** Listener restart backoff after the bus went away: first and largest delay. Default 1 s, 60 s. */
  retryMinMs?: number;
  retryMaxMs?: number;
}

const kindPattern = /^[a-z][a-z0-9_-]{0,31}$/;

function sameKinds(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((k, i) => k === b[i]);
}

function msSince(startUs: number): number {
  const nowUs = Number(process.hrtime.bigint() / 1000n);
  return Math.max(0, nowUs - startUs) / 1000;
}

/** The OS power integration; create it with createPowerIntegration() (./index.ts). */
export abstract class PowerIntegration {
  abstract readonly backend: PowerBackend;

  protected hooks: PowerHooks | null = null;
  protected readonly opts: Required<PowerOptions>;
  protected stopped = false;
  protected available = false;
  protected reason: string | null = 'not started';
  protected library: string | null = null;
  protected listener: PowerStatus['listener'] = 'stopped';
  protected phase: PowerStatus['phase'] = 'idle';
  /** Bumped whenever held locks become meaningless (stop, logind restart, lost bus); stale acquisitions are dropped. */
  protected generation = 0;

  private startPromise: Promise<void> | null = null;
  private lastSuspend: PowerStatus['lastSuspend'] = null;
  private suspendCount = 0;
  private resumedWhilePreparing = false;

  private desiredKinds: string[] = [];
  private block: { handle: number; kinds: string[] } | null = null;
  private blockReason: string | null = null;
  private reconciling: Promise<void> | null = null;
  private reconcileAgain = false;

  constructor(opts: PowerOptions = {}) {
    this.opts = {
      sleepTimeoutMs: opts.sleepTimeoutMs ?? 4000,
      who: opts.who ?? 'stash',
      retryMinMs: opts.retryMinMs ?? 1000,
      retryMaxMs: opts.retryMaxMs ?? 60_000,
    };
  }

  /**
   * Takes the delay lock and starts the suspend listener. Never throws or
   * rejects because the OS facility is missing (no library, no bus, no logind):
   * status() says why, and the listener retries in the background. The promise
   * settles once the first attempt is done (lock taken, or known unavailable);
   * callers may ignore it. Calling start twice returns the first promise.
   */
  start(hooks: PowerHooks): Promise<void> {
    if (this.startPromise) return this.startPromise;
    if (this.stopped) return Promise.resolve();
    this.hooks = hooks;
    // The native listener does not keep the process alive (an agent that is
    // done must be able to exit), so awaiting the first attempt would let a
    // process with nothing else to do exit mid-way. Hold the loop until then;
    // the attempt is bounded by the native bus timeouts (a few seconds).
    const keepAlive = setInterval(() => {}, 60_000);
    this.startPromise = this.open()
      .catch((err) => {
        this.available = false;
        this.listener = 'unavailable';
        this.reason = errorMessage(err);
        this.log('warning', `power integration unavailable: ${this.reason}`);
      })
      .finally(() => clearInterval(keepAlive));
    return this.startPromise;
  }

  /**
   * [] releases the block lock; a non-empty list holds one block inhibitor
   * ("sleep", who, kinds joined with ",", "block") that names them. A change of
   * kinds takes the new lock before dropping the old one, so there is no gap.
   * Returns when the lock state has caught up (callers may ignore it; it never rejects).
   */
  setActivityInhibit(kinds: string[]): Promise<void> {
    if (
      !Array.isArray(kinds) ||
      kinds.length > 16 ||
      !kinds.every((k) => typeof k === 'string' && kindPattern.test(k))
    ) {
      throw new PowerError('POWER_BAD_KINDS', 'activity kinds must be at most 16 short lowercase names');
    }
    this.desiredKinds = [...new Set(kinds)].sort();
    return this.reconcileBlock();
  }

  /**
   * True from the suspend signal until resume (phase 'preparing' or 'sleeping').
   * The agent must not cache new keys while this is true: they would outlive the wipe.
   */
  get suspending(): boolean {
    return this.phase !== 'idle';
  }

  status(): PowerStatus {
    const delay = this.delayLockState();
    return {
      backend: this.backend,
      available: this.available,
      reason: this.available ? null : this.reason,
      library: this.library,
      delayLock: { held: delay.held, reason: delay.held ? null : delay.reason },
      blockLock: {
        held: this.block !== null,
        kinds: this.block ? [...this.block.kinds] : [],
        reason: this.block || this.desiredKinds.length === 0 ? null : (this.blockReason ?? 'not taken yet'),
      },
      listener: this.listener,
      phase: this.phase,
      lastSuspend: this.lastSuspend ? { ...this.lastSuspend } : null,
      suspendCount: this.suspendCount,
    };
  }

  /** Releases every lock and stops the listener (joins its thread). Idempotent; the object cannot be restarted. */
  stop(): void {
    if (this.stopped) return;
    this.stopped = true;
    this.generation++;
    this.close();
    this.dropBlock();
    this.listener = 'stopped';
    this.available = false;
    this.reason = 'stopped';
  }

  // ---- for subclasses ------------------------------------------------------

  /** Starts the listener and takes the delay lock; may reject (start() turns that into status). */
  protected abstract open(): Promise<void>;
  /** Stops the listener and releases the delay lock. */
  protected abstract close(): void;
  protected abstract delayLockState(): { held: boolean; reason: string | null };
  /** Whether a block lock can be taken now. */
  protected abstract canBlock(): boolean;
  protected abstract acquireBlock(why: string): Promise<number>;
  protected abstract releaseBlock(handle: number): void;

  protected log(level: LogLevel, message: string): void {
    try {
      this.hooks?.log?.(level, message);
    } catch {
      // A failing logger must not break the suspend path.
    }
  }

  /**
   * The suspend sequence: beforeSleep (bounded by sleepTimeoutMs), then
   * `release` (let the OS proceed). `receivedUs` is when the signal arrived
   * (process.hrtime microseconds), so the latencies include the native hop.
   */
  protected async handleSleep(release: () => void, receivedUs?: number): Promise<void> {
    const startUs =
      receivedUs !== undefined && receivedUs > 0 && receivedUs <= Number(process.hrtime.bigint() / 1000n)
        ? receivedUs
        : Number(process.hrtime.bigint() / 1000n);
    if (this.phase === 'preparing') {
      this.log('warning', 'suspend signal while the previous one is still being handled; ignored');
      return;
    }
    this.phase = 'preparing';
    this.resumedWhilePreparing = false;
    this.log('info', 'system is preparing to sleep: wiping keys');
    let timer: NodeJS.Timeout | undefined;
    try {
      const hook = this.hooks ? Promise.resolve().then(() => this.hooks!.beforeSleep()) : Promise.resolve();
      const timeout = new Promise<'timeout'>((resolve) => {
        timer = setTimeout(() => resolve('timeout'), this.opts.sleepTimeoutMs);
      });
      if ((await Promise.race([hook, timeout])) === 'timeout') {
        this.log(
          'error',
          `beforeSleep did not finish within ${this.opts.sleepTimeoutMs} ms; letting the system sleep anyway`,
        );
      }
    } catch (err) {
      this.log('error', `beforeSleep failed: ${errorMessage(err)}`);
    } finally {
      clearTimeout(timer);
    }
    const wipeLatencyMs = msSince(startUs);
    try {
      release();
    } catch (err) {
      this.log('error', `releasing the delay lock failed: ${errorMessage(err)}`);
    }
    const releaseLatencyMs = msSince(startUs);
    this.lastSuspend = { at: new Date().toISOString(), wipeLatencyMs, releaseLatencyMs };
    this.suspendCount++;
    this.log('info', `delay lock released ${releaseLatencyMs.toFixed(2)} ms after the suspend signal`);
    this.phase = 'sleeping';
    if (this.resumedWhilePreparing) this.handleResume();
  }

  /** The resume sequence: back to idle, afterResume, then the subclass re-takes the delay lock. */
  protected handleResume(): void {
    if (this.phase === 'preparing') {
      // Suspend was cancelled or failed fast: finish releasing first, then resume.
      this.resumedWhilePreparing = true;
      return;
    }
    this.resumedWhilePreparing = false;
    this.phase = 'idle';
    try {
      this.hooks?.afterResume?.();
    } catch (err) {
      this.log('error', `afterResume failed: ${errorMessage(err)}`);
    }
    this.resumed();
  }

  /** Called when the system is back; subclasses re-take what a suspend released. */
  protected resumed(): void {}

  /** Forgets the block lock and releases its handle (a failure is logged: the backend may already be gone). */
  protected dropBlock(): void {
    const block = this.block;
    this.block = null;
    if (block) {
      try {
        this.releaseBlock(block.handle);
      } catch (err) {
        this.log('warning', `releasing the block lock failed: ${errorMessage(err)}`);
      }
    }
  }

  /** Brings the block lock in line with the wanted kinds; serialised, never rejects. */
  protected reconcileBlock(): Promise<void> {
    if (this.reconciling) {
      this.reconcileAgain = true;
      return this.reconciling;
    }
    this.reconciling = (async () => {
      do {
        this.reconcileAgain = false;
        await this.reconcileOnce();
      } while (this.reconcileAgain && !this.stopped);
    })().finally(() => {
      this.reconciling = null;
    });
    return this.reconciling;
  }

  private async reconcileOnce(): Promise<void> {
    const want = this.desiredKinds;
    if (this.stopped) return;
    if (want.length === 0) {
      this.dropBlock();
      return;
    }
    if (this.block && sameKinds(this.block.kinds, want)) return;
    if (!this.canBlock()) {
      this.dropBlock();
      this.blockReason = this.reason ?? 'the power backend is not available';
      return;
    }
    const generation = this.generation;
    let handle: number;
    try {
      handle = await this.acquireBlock(want.join(','));
    } catch (err) {
      this.blockReason = errorMessage(err);
      this.log('warning', `could not take the sleep block lock: ${this.blockReason}`);
      return;
    }
    if (this.stopped || generation !== this.generation) {
      this.releaseBlock(handle);
      this.reconcileAgain = !this.stopped;
      return;
    }
    const old = this.block;
    this.block = { handle, kinds: want };
    this.blockReason = null;
    if (old) {
      try {
        this.releaseBlock(old.handle);
      } catch (err) {
        this.log('warning', `releasing the previous block lock failed: ${errorMessage(err)}`);
      }
    }
    if (!sameKinds(this.desiredKinds, want)) this.reconcileAgain = true;
  }
}
