/**
 * Per-client request limit: a token bucket per address (capacity `burst`,
 * refilled at `perMinute` tokens per minute). perMinute 0 disables it.
 *
 * A request is let in while its bucket holds a whole token. Costs found out
 * afterwards (charge) and tokens spent in another process (debit) may take
 * the bucket below empty, down to `maxDebt` tokens owed: later requests wait
 * until the debt is paid off, so an extra cost is collected in full however
 * the requests are spaced, and a client that goes over the limit at once is
 * never locked out for longer than (maxDebt + 1) tokens take to come back.
 */
import type { Clock } from '../clock.js';
import { BoundedMap } from './bounded-map.js';

interface Bucket {
  tokens: number;
  at: number;
}

export type Decision = { ok: true } | { ok: false; retryAfter: number };

export class RequestLimiter {
  private readonly buckets: BoundedMap<Bucket>;
  private ratePerMs: number;
  private takes = 0;
  /** The fewest tokens a bucket may hold: minus the debt allowed. */
  private readonly floor: number;
  /** Tokens taken here since the last takeConsumed(), by key: kept only when trackConsumption() was called. */
  private consumed: Map<string, number> | undefined;

  constructor(
    private readonly opts: { perMinute: number; burst: number; clock: Clock; maxEntries?: number; maxDebt?: number },
  ) {
    this.buckets = new BoundedMap(opts.maxEntries ?? 100_000);
    this.ratePerMs = opts.perMinute / 60_000;
    this.floor = -(opts.maxDebt ?? 0);
  }

  /**
   * New rate and burst (a configuration reload). Buckets keep what they
   * hold, capped at the new burst; 0 per minute turns the limit off.
   */
  configure(perMinute: number, burst: number): void {
    this.opts.perMinute = perMinute;
    this.opts.burst = burst;
    this.ratePerMs = perMinute / 60_000;
  }

  get enabled(): boolean {
    return this.opts.perMinute > 0;
  }

  get entries(): number {
    return this.buckets.size;
  }

  /** Takes one token for `key`; when none is left, says how many seconds until one is. */
  take(key: string): Decision {
    if (!this.enabled) return { ok: true };
    const now = this.opts.clock.now();
    if (++this.takes % 4096 === 0) this.purgeIdle(now);
    // get() already moves a known bucket to the recently-used end: only a new one needs set().
    let b = this.buckets.get(key);
    if (b === undefined) {
      b = { tokens: this.opts.burst, at: now };
      this.buckets.set(key, b);
    }
    b.tokens = this.refilled(b, now);
    b.at = now;
    if (b.tokens >= 1) {
      b.tokens -= 1;
      if (this.consumed) this.consumed.set(key, (this.consumed.get(key) ?? 0) + 1);
      return { ok: true };
    }
    return this.refusal(b.tokens);
  }

  /**
   * Takes `n` more tokens from `key` after a request that turned out costly
   * (a fetch that found nothing to hand out). Never refuses: the bucket goes
   * into debt (at most maxDebt) and the caller's next requests pay for it.
   */
  charge(key: string, n: number): void {
    if (!this.enabled || n <= 0) return;
    const b = this.buckets.get(key);
    if (b === undefined) return;
    const now = this.opts.clock.now();
    b.tokens = Math.max(this.floor, this.refilled(b, now) - n);
    b.at = now;
    if (this.consumed) this.consumed.set(key, (this.consumed.get(key) ?? 0) + n);
  }

  /**
   * Whether every token taken from `key` so far is paid for (the bucket is
   * not in debt); when not, how many seconds until the next request would be
   * let in. Another process let a request in on its own count and handed its
   * token over (debit): this says whether that count was right.
   */
  covered(key: string): Decision {
    if (!this.enabled) return { ok: true };
    const b = this.buckets.get(key);
    if (b === undefined) return { ok: true };
    const tokens = this.refilled(b, this.opts.clock.now());
    return tokens >= 0 ? { ok: true } : this.refusal(tokens);
  }

  /**
   * Several processes serving one server (multi/store-side.ts): each
   * reports the tokens its requests took (takeConsumed) and takes those the
   * others' requests took (debit), so every address has one allowance across
   * them, exact to within one exchange interval. A call that needs the count
   * to be exact now hands a key's tokens over with it (takeConsumedOf).
   */
  trackConsumption(): void {
    this.consumed ??= new Map();
  }

  /** The tokens taken here since the last call, by key (empty unless tracking). */
  takeConsumed(): Array<[string, number]> {
    if (!this.consumed || this.consumed.size === 0) return [];
    const out = [...this.consumed];
    this.consumed.clear();
    return out;
  }

  /**
   * The tokens taken here from `key` since they were last reported, now
   * handed over with a call instead (0 unless tracking): the next
   * takeConsumed() leaves them out.
   */
  takeConsumedOf(key: string): number {
    const n = this.consumed?.get(key) ?? 0;
    if (n > 0) this.consumed!.delete(key);
    return n;
  }

  /** Takes `n` tokens that another process's requests used from `key`: never refused, down to maxDebt owed, not reported back. */
  debit(key: string, n: number): void {
    if (!this.enabled || n <= 0) return;
    const now = this.opts.clock.now();
    let b = this.buckets.get(key);
    if (b === undefined) {
      b = { tokens: this.opts.burst, at: now };
      this.buckets.set(key, b);
    }
    b.tokens = Math.max(this.floor, this.refilled(b, now) - n);
    b.at = now;
  }

  /** Whether `key` has a token left, without taking it (a request that is expensive to judge asks first). */
  check(key: string): Decision {
    if (!this.enabled) return { ok: true };
    const b = this.buckets.get(key);
    if (b === undefined) return { ok: true };
    const tokens = this.refilled(b, this.opts.clock.now());
    return tokens >= 1 ? { ok: true } : this.refusal(tokens);
  }

  private refilled(b: Bucket, now: number): number {
    return Math.min(this.opts.burst, b.tokens + Math.max(0, now - b.at) * this.ratePerMs);
  }

  private refusal(tokens: number): Decision {
    return { ok: false, retryAfter: Math.max(1, Math.ceil((1 - tokens) / this.ratePerMs / 1000)) };
  }

  /** Drops buckets that have refilled completely: they hold no information. */
  purgeIdle(now = this.opts.clock.now()): number {
    return this.buckets.purge((b) => b.tokens + (now - b.at) * this.ratePerMs >= this.opts.burst);
  }
}
