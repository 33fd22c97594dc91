/**
 * One view of a server served from several processes (`run --processes N`):
 * the store's process keeps the last report of each fetch process (sent
 * every REPORT_MS, and asked for afresh at each scrape) and adds their
 * counters to its own. A fetch process that ends leaves its last counters
 * behind, so the sums never go down when one is restarted: a counter that
 * fell would read to Prometheus as a reset. Its gauges (memory, event-loop
 * delay) leave with it.
 */
import { addInto, type Snapshot } from './registry.js';
import type { ProcessReport } from './process-metrics.js';

/** How often a fetch process sends its report unasked (what a kill -9 can lose of its counts). */
export const REPORT_MS = 1000;
/** How long a scrape waits for a fetch process's fresh report before it takes the last one. */
export const ASK_TIMEOUT_MS = 1000;
/** How long a report of an ended process may still arrive (its last one races the exit). */
const LATE_MS = 60_000;

export class ProcessReports {
  private readonly live = new Map<number, ProcessReport>();
  private readonly ended = new Map<number, { counters: Map<string, number>; at: number }>();
  /** Counters of processes that ended. */
  private readonly base = new Map<string, number>();

  /** The report of the fetch process `pid` (the channel keeps order: a later report is a newer one). */
  update(pid: number, report: ProcessReport): void {
    const gone = this.ended.get(pid);
    if (gone === undefined) {
      this.live.set(pid, report);
      return;
    }
    // Its last report, arriving after its exit: only what it adds to what was kept.
    for (const [s, v] of report.counters) {
      const added = v - (gone.counters.get(s) ?? 0);
      if (added <= 0) continue;
      this.base.set(s, (this.base.get(s) ?? 0) + added);
      gone.counters.set(s, v);
    }
  }

  /** The fetch process `pid` ended: its counters stay in the sums, its gauges go. */
  retire(pid: number, now = Date.now()): void {
    const last = this.live.get(pid);
    this.live.delete(pid);
    if (last) addInto(this.base, last.counters);
    this.ended.set(pid, { counters: new Map(last?.counters ?? []), at: now });
    for (const [p, e] of this.ended) if (e.at + LATE_MS < now) this.ended.delete(p);
  }

  /** Counters summed over `own`, every fetch process and the ended ones; gauges of each live process. */
  sum(own: ProcessReport): { counters: Map<string, number>; gauges: Snapshot } {
    const counters = new Map(this.base);
    addInto(counters, own.counters);
    const gauges: Snapshot = [...own.gauges];
    for (const r of this.live.values()) {
      addInto(counters, r.counters);
      gauges.push(...r.gauges);
    }
    return { counters, gauges };
  }
}
