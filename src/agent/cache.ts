/**
 * The key cache. Each key lives in a sodium_malloc buffer of its own, taken
 * from the process's secure pool (native/secure-pool.ts), kept PROT_NONE
 * (sodium_mprotect_noaccess) except while it is copied, and zeroed and given
 * back to the pool when its entry goes: puts and forgets reuse the same
 * buffers instead of allocating guarded memory per request.
 *
 * Expiry is sliding: every hit moves it to now + TTL; list never extends it.
 * Time is read on two clocks and an entry expires when EITHER says so: the
 * wall clock keeps running while the machine sleeps (a missed suspend signal
 * still expires keys on time), and the monotonic clock cannot be set back (a
 * clock change cannot keep a key alive).
 */
import sodium from 'sodium-native';
import { StashError } from '../errors.js';
import { securePool } from '../native/secure-pool.js';
import { DEFAULT_TTL_SECONDS, MAX_ENTRIES } from './limits.js';

export interface Clock {
  /** Wall-clock milliseconds (runs during suspend). */
  wall(): number;
  /** Monotonic milliseconds (never goes back). */
  mono(): number;
}

export const systemClock: Clock = {
  wall: () => Date.now(),
  mono: () => performance.now(),
};

interface Entry {
  id: Buffer;
  key: Buffer;
  path: string | null;
  ttl: number;
  createdMono: number;
  expiresWall: number;
  expiresMono: number;
}

export interface CacheListing {
  id: Buffer;
  path: string | null;
  ttl: number;
  expiresInMs: number;
  ageMs: number;
}

export class CacheFullError extends StashError {
  constructor(max: number) {
    super('CACHE_FULL', `the agent cache is full (${max} entries); forget some with \`stash vault sessions lock\``);
  }
}

/** Zeroes a stored key and gives its buffer back (the pool makes it readable again first). */
function wipeKey(key: Buffer): void {
  securePool.release(key);
}

export class KeyCache {
  private readonly entries = new Map<string, Entry>();

  constructor(
    private readonly maxEntries = MAX_ENTRIES,
    private readonly clock: Clock = systemClock,
  ) {}

  get size(): number {
    return this.entries.size;
  }

  /** Stores a copy of `key` (the caller keeps and wipes its own buffer). Replaces an existing entry. */
  put(id: Buffer, key: Buffer, path: string | null, ttl: number | null): void {
    const seconds = ttl ?? DEFAULT_TTL_SECONDS;
    const hex = id.toString('hex');
    this.prune();
    if (!this.entries.has(hex) && this.entries.size >= this.maxEntries) throw new CacheFullError(this.maxEntries);
    const secure = securePool.take(key.length);
    key.copy(secure);
    sodium.sodium_mprotect_noaccess(secure);
    this.remove(hex);
    const mono = this.clock.mono();
    this.entries.set(hex, {
      id: Buffer.from(id),
      key: secure,
      path,
      ttl: seconds,
      createdMono: mono,
      expiresWall: this.clock.wall() + seconds * 1000,
      expiresMono: mono + seconds * 1000,
    });
  }

  /**
   * A hit copies the key into `into(length)` (give it secure memory) and
   * slides the expiry; a miss or an expired entry returns null.
   */
  get(id: Buffer, into: (length: number) => Buffer): { key: Buffer; ttl: number } | null {
    const hex = id.toString('hex');
    const entry = this.entries.get(hex);
    if (!entry) return null;
    if (this.expired(entry)) {
      this.remove(hex);
      return null;
    }
    entry.expiresWall = this.clock.wall() + entry.ttl * 1000;
    entry.expiresMono = this.clock.mono() + entry.ttl * 1000;
    const out = into(entry.key.length);
    sodium.sodium_mprotect_readonly(entry.key);
    try {
      entry.key.copy(out);
    } finally {
      sodium.sodium_mprotect_noaccess(entry.key);
    }
    return { key: out, ttl: entry.ttl };
  }

  forget(id: Buffer): boolean {
    return this.remove(id.toString('hex'));
  }

  /** Wipes every entry; returns how many there were. */
  forgetAll(): number {
    const n = this.entries.size;
    for (const hex of [...this.entries.keys()]) this.remove(hex);
    return n;
  }

  /** Entries for diagnostics, oldest first. Never extends a TTL. */
  list(): CacheListing[] {
    this.prune();
    const wall = this.clock.wall();
    const mono = this.clock.mono();
    return [...this.entries.values()].map((e) => ({
      id: e.id,
      path: e.path,
      ttl: e.ttl,
      expiresInMs: Math.max(0, Math.min(e.expiresWall - wall, e.expiresMono - mono)),
      ageMs: Math.max(0, mono - e.createdMono),
    }));
  }

  /** Removes expired entries; returns how many. */
  prune(): number {
    let n = 0;
    for (const [hex, e] of this.entries) {
      if (this.expired(e)) {
        this.remove(hex);
        n++;
      }
    }
    return n;
  }

  /** Milliseconds until the next entry expires, or null when empty. */
  nextExpiryMs(): number | null {
    let next: number | null = null;
    const wall = this.clock.wall();
    const mono = this.clock.mono();
    for (const e of this.entries.values()) {
      const left = Math.min(e.expiresWall - wall, e.expiresMono - mono);
      if (next === null || left < next) next = left;
    }
    return next === null ? null : Math.max(0, next);
  }

  private expired(e: Entry): boolean {
    return this.clock.wall() >= e.expiresWall || this.clock.mono() >= e.expiresMono;
  }

  private remove(hex: string): boolean {
    const e = this.entries.get(hex);
    if (!e) return false;
    this.entries.delete(hex);
    wipeKey(e.key);
    return true;
  }
}
