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

/** One item of a structured source (a pass file, a Bitwarden or 1Password item): the values added with it form one entry. */
export interface SourceItem {
  /** Its path as the source writes it: folders (or a vault), then the title; not yet valid segments. */
  segments: readonly string[];
  /** Where it came from, for the listing: `web/github.com.gpg`, `item "GitHub"`. Never a value. */
  source: string;
}

/** Where a value sits in its item: the item's value (field null: its password, pass's line 1) or one of its fields. */
export interface Place {
  item: SourceItem;
  /** The field as the source names it (`user`, `API key`, `notes`); mapped to a field name by paths.ts. */
  field: string | null;
}

/** One value read from an import file, under the name its source gives it. */
export interface Collected {
  /** The wanted flat name (`--flat`): a dotenv key, a JSON field, or built from an item (`GITHUB_PASSWORD`); may still be invalid. */
  name: string;
  /** Where it came from, for listings and messages: `line 4`, `item "GitHub" password`. Never a value. */
  from: string;
  /** A view into the collector's secure buffer; valid until wipe(). */
  value: Buffer;
  /** Its item and field, for the structured import (paths.ts); absent for dotenv and JSON, which are flat. */
  place?: Place;
}

export class ImportError extends StashError {
  constructor(message: string) {
    super('IMPORT_INVALID', message);
  }
}

export class Collector {
  private arena: Buffer | null = null;
  private used = 0;
  private readonly items: Array<{ name: string; from: string; at: number; length: number; place: Place | undefined }> =
    [];
  /** Empty values seen (not imported: an empty entry is nearly always a field left blank). */
  empty = 0;

  constructor(private readonly file: string) {}

  /**
   * Adds one value. A string is encoded straight into secure memory; a
   * Buffer is copied and then zeroed (the caller hands over a temporary); an
   * array of Buffers is one value of their bytes in turn, each zeroed (the
   * kept lines of a pass entry, without a temporary to join them in).
   */
  add(name: string, from: string, value: string | Buffer | readonly Buffer[], place?: Place): void {
    const parts = typeof value === 'string' ? null : Buffer.isBuffer(value) ? [value] : value;
    const length =
      parts === null ? Buffer.byteLength(value as string, 'utf8') : parts.reduce((n, p) => n + p.length, 0);
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
      if (parts === null) this.arena!.write(value as string, this.used, 'utf8');
      else parts.reduce((at, p) => at + p.copy(this.arena!, at), this.used);
      this.items.push({ name, from, at: this.used, length, place });
      this.used += length;
    } finally {
      for (const p of parts ?? []) if (!(p as Buffer & { secure?: boolean }).secure) p.fill(0);
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
    return this.items.map((i) => ({
      name: i.name,
      from: i.from,
      value: this.arena!.subarray(i.at, i.at + i.length),
      ...(i.place ? { place: i.place } : {}),
    }));
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
