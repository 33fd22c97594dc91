/**
 * Where parsers put the values they read: one growing sodium secure buffer
 * (not one allocation per value: sodium_malloc maps guard pages each time,
 * and a store of thousands of entries would exhaust the locked-memory limit,
 * docs: MACHINE.md). A value is copied in as soon as it is found; the
 * caller's temporary is then zeroed where it is a Buffer. Values are handed
 * out as views once parsing is done, and all wiped together by wipe().
 *
 * Pure memory: no I/O, so every parser can be tested on bytes alone.
 */
import { StashError } from '../../errors.js';
import { MAX_BODY_BYTES, MAX_ENTRIES, MAX_VALUE_BYTES } from '../../vault/names.js';
import { secureAlloc, wipe } from '../../vault/secure.js';

/** One value read from an import file, under the name its source gives it. */
export interface Collected {
  /** The wanted name: a dotenv key, a JSON field, or built from an item (`GITHUB_PASSWORD`); may still be invalid. */
  name: string;
  /** Where it came from, for listings and messages: `line 4`, `item "GitHub" password`. Never a value. */
  from: string;
  /** A view into the collector's secure buffer; valid until wipe(). */
  value: Buffer;
}

export class ImportError extends StashError {
  constructor(message: string) {
    super('IMPORT_INVALID', message);
  }
}

export class Collector {
  private arena: Buffer | null = null;
  private used = 0;
  private readonly items: Array<{ name: string; from: string; at: number; length: number }> = [];
  /** Empty values seen (not imported: an empty entry is nearly always a field left blank). */
  empty = 0;

  constructor(private readonly file: string) {}

  /**
   * Adds one value. A string is encoded straight into secure memory; a
   * Buffer is copied and then zeroed (the caller hands over a temporary).
   */
  add(name: string, from: string, value: string | Buffer): void {
    const length = typeof value === 'string' ? Buffer.byteLength(value, 'utf8') : value.length;
    try {
      if (length === 0) {
        this.empty++;
        return;
      }
      if (length > MAX_VALUE_BYTES)
        throw new ImportError(
          `${this.file}: ${from}: the value is ${length} bytes; an entry holds at most ${MAX_VALUE_BYTES} (64 KiB)`,
        );
      if (this.items.length >= MAX_ENTRIES)
        throw new ImportError(`${this.file}: more than ${MAX_ENTRIES} values, the most one container holds`);
      if (this.used + length > MAX_BODY_BYTES)
        throw new ImportError(
          `${this.file}: the values add up to more than ${MAX_BODY_BYTES} bytes (1 MiB), the most one container holds`,
        );
      this.reserve(length);
      if (typeof value === 'string') this.arena!.write(value, this.used, 'utf8');
      else value.copy(this.arena!, this.used);
      this.items.push({ name, from, at: this.used, length });
      this.used += length;
    } finally {
      if (typeof value !== 'string' && !(value as Buffer & { secure?: boolean }).secure) value.fill(0);
    }
  }

  private reserve(length: number): void {
    const need = this.used + length;
    if (this.arena !== null && need <= this.arena.length) return;
    const bigger = secureAlloc(Math.min(MAX_BODY_BYTES, Math.max(need, (this.arena?.length ?? 2048) * 2)));
    if (this.arena !== null) {
      this.arena.copy(bigger, 0, 0, this.used);
      wipe(this.arena);
    }
    this.arena = bigger;
  }

  /** Every value, in the order added (views; wipe() ends them). */
  entries(): Collected[] {
    return this.items.map((i) => ({ name: i.name, from: i.from, value: this.arena!.subarray(i.at, i.at + i.length) }));
  }

  get size(): number {
    return this.items.length;
  }

  wipe(): void {
    wipe(this.arena);
    this.arena = null;
    this.used = 0;
    this.items.length = 0;
  }
}
