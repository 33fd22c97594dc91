/**
 * Rate limiting of the agent's log lines. A client can make the agent log at
 * will (100,000 bad frames once wrote 11.2 MB in 3.4 s), so lines of the same
 * shape (the same text once numbers, hex and quoted parts are masked: "closing
 * a connection from pid 4242: bad frame magic ...") are written at most
 * BURST times per window; the rest are counted, and one line at the end of the
 * window says how many there were. Like syslog's "last message repeated N
 * times", but for lines that differ only in their details.
 */
import type { Level, Logger } from './log.js';

/** Lines of one shape written per window before the rest are only counted. */
export const BURST = 10;
/** The window, in ms. */
export const WINDOW_MS = 60_000;
/** Shapes tracked per window; lines of further shapes share one count. */
const MAX_SHAPES = 256;
const OTHER = '(other lines)';

interface Count {
  level: Level;
  written: number;
  suppressed: number;
  /** The last line counted and not written: the summary quotes it. */
  sample: string;
}

/** The grouping key of a line: numbers, hex words and quoted parts masked. */
export function lineShape(level: Level, message: string): string {
  const masked = message.replace(/"[^"]*"/g, '"…"').replace(/\b[0-9a-f]*[0-9][0-9a-f]*\b/gi, '#');
  return `${level} ${masked}`;
}

export class RateLimitedLogger implements Logger {
  readonly target: string;
  private counts = new Map<string, Count>();
  private windowStart: number;
  private timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly inner: Logger,
    private readonly opts: { burst?: number; windowMs?: number; now?: () => number } = {},
  ) {
    this.target = inner.target;
    this.windowStart = this.now();
  }

  log(level: Level, message: string): void {
    if (this.now() - this.windowStart >= this.windowMs) this.flush();
    let shape = lineShape(level, message);
    if (!this.counts.has(shape) && this.counts.size >= MAX_SHAPES) shape = OTHER;
    let c = this.counts.get(shape);
    if (!c) {
      c = { level, written: 0, suppressed: 0, sample: '' };
      this.counts.set(shape, c);
    }
    if (c.written < (this.opts.burst ?? BURST)) {
      c.written++;
      this.inner.log(level, message);
      return;
    }
    c.suppressed++;
    c.sample = message;
    // A quiet agent still reports the count when the window ends, not only at its next line.
    this.timer ??= setTimeout(() => this.flush(), Math.max(0, this.windowStart + this.windowMs - this.now())).unref();
  }

  /** Writes the counts of suppressed lines and starts a new window (also called when the agent exits). */
  flush(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    const seconds = Math.max(1, Math.round((this.now() - this.windowStart) / 1000));
    for (const c of this.counts.values()) {
      if (c.suppressed === 0) continue;
      const n = c.suppressed.toLocaleString('en-US');
      this.inner.log(
        c.level,
        `"${c.sample}" ... repeated ${n} times in ${seconds} s (lines like it, not logged one by one)`,
      );
    }
    this.counts.clear();
    this.windowStart = this.now();
  }

  private get windowMs(): number {
    return this.opts.windowMs ?? WINDOW_MS;
  }

  private now(): number {
    return (this.opts.now ?? Date.now)();
  }
}
