/**
 * The counters of one process: cells keyed by their series (`name` or
 * `name{label="value",...}`, the exposition's own spelling), incremented in
 * place on hot paths (`cell.n++`, no lookup per event). A snapshot is the
 * list of series and values; the store's process adds the snapshots of its
 * fetch processes to its own (gather.ts), so one scrape sees every request
 * of every process.
 */

/** One counter series. */
export interface Cell {
  n: number;
}

/** Series and values, as a fetch process sends them. */
export type Snapshot = Array<[series: string, value: number]>;

/** A label value as the text format writes it (backslash, double quote and newline escaped). */
export function labelValue(value: string): string {
  return value.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n');
}

/** `name{a="x",b="y"}` from pairs; labels in the order given. */
export function series(name: string, labels: Record<string, string | number> = {}): string {
  const parts = Object.entries(labels).map(([k, v]) => `${k}="${labelValue(String(v))}"`);
  return parts.length === 0 ? name : `${name}{${parts.join(',')}}`;
}

/** The family (metric name) of a series. */
export function familyOf(s: string): string {
  const brace = s.indexOf('{');
  return brace < 0 ? s : s.slice(0, brace);
}

export class Counters {
  private readonly cells = new Map<string, Cell>();

  /** The cell of `name` with `labels` (created at 0, so a scrape shows it before its first event). */
  cell(name: string, labels?: Record<string, string | number>): Cell {
    return this.cellOf(series(name, labels));
  }

  /** The cell of a series spelled out already. */
  cellOf(s: string): Cell {
    let c = this.cells.get(s);
    if (c === undefined) {
      c = { n: 0 };
      this.cells.set(s, c);
    }
    return c;
  }

  snapshot(): Snapshot {
    const out: Snapshot = [];
    for (const [s, c] of this.cells) out.push([s, c.n]);
    return out;
  }
}

/** Adds `snapshot` into `into`, series by series. */
export function addInto(into: Map<string, number>, snapshot: Snapshot): void {
  for (const [s, v] of snapshot) into.set(s, (into.get(s) ?? 0) + v);
}
