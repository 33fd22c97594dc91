/**
 * Time source of the key server. Limits, TTLs and expiry read the clock
 * through this interface so tests can move time forward by an hour instead of
 * sleeping.
 */
export interface Clock {
  /** Milliseconds since the Unix epoch. */
  now(): number;
}

export const systemClock: Clock = { now: () => Date.now() };
