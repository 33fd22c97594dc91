/**
 * A Map kept in least-recently-used order with a hard entry cap, so that a
 * flood of distinct client addresses cannot grow a limiter without bound.
 * Entries the owner reports as idle are dropped first by `purge`.
 */
export class BoundedMap<V> {
  private readonly map = new Map<string, V>();

  constructor(private readonly maxEntries: number) {}

  get size(): number {
    return this.map.size;
  }

  /** The value, moved to the most-recently-used end. */
  get(key: string): V | undefined {
    const v = this.map.get(key);
    if (v !== undefined) {
      this.map.delete(key);
      this.map.set(key, v);
    }
    return v;
  }

  set(key: string, value: V): void {
    this.map.delete(key);
    this.map.set(key, value);
    if (this.map.size > this.maxEntries) {
      // Oldest first: Map iteration follows insertion (= last use) order.
      const excess = this.map.size - this.maxEntries;
      let n = 0;
      for (const k of this.map.keys()) {
        if (n++ >= excess) break;
        this.map.delete(k);
      }
    }
  }

  /** Removes every entry for which `idle` says true; returns how many. */
  purge(idle: (value: V) => boolean): number {
    let removed = 0;
    for (const [k, v] of this.map) {
      if (idle(v)) {
        this.map.delete(k);
        removed++;
      }
    }
    return removed;
  }
}
