/**
 * "At most N events per hour per key" (verification emails per address and
 * per source IP): an exact sliding window holding the times of the last N
 * events of each key. limit 0 disables it.
 */
import type { Clock } from '../clock.js';
import { BoundedMap } from './bounded-map.js';
import type { Decision } from './token-bucket.js';

export class WindowLimiter {
  private readonly events: BoundedMap<number[]>;
  private checks = 0;

  constructor(private readonly opts: { limit: number; windowMs?: number; clock: Clock; maxEntries?: number }) {
    this.events = new BoundedMap(opts.maxEntries ?? 100_000);
  }

  /** A new limit (a configuration reload); the events already counted stay. */
  configure(limit: number): void {
    this.opts.limit = limit;
  }

  private get windowMs(): number {
    return this.opts.windowMs ?? 3_600_000;
  }

  get entries(): number {
    return this.events.size;
  }

  /** Whether one more event for `key` is allowed now (nothing is recorded). */
  check(key: string): Decision {
    if (this.opts.limit <= 0) return { ok: true };
    const now = this.opts.clock.now();
    if (++this.checks % 4096 === 0) this.purgeIdle(now);
    const times = this.recent(key, now);
    if (times.length < this.opts.limit) return { ok: true };
    return { ok: false, retryAfter: Math.max(1, Math.ceil((times[0]! + this.windowMs - now) / 1000)) };
  }

  /** Records one event for `key`. */
  record(key: string): void {
    if (this.opts.limit <= 0) return;
    const now = this.opts.clock.now();
    const times = this.recent(key, now);
    times.push(now);
    if (times.length > this.opts.limit) times.splice(0, times.length - this.opts.limit);
    this.events.set(key, times);
  }

  private recent(key: string, now: number): number[] {
    const times = this.events.get(key) ?? [];
    while (times.length > 0 && times[0]! + this.windowMs <= now) times.shift();
    return times;
  }

  /** Drops keys whose events are all older than the window. */
  purgeIdle(now = this.opts.clock.now()): number {
    return this.events.purge((times) => times.length === 0 || times[times.length - 1]! + this.windowMs <= now);
  }
}
