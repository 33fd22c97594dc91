/**
 * What each process of a server counts itself (the store's process and
 * every fetch process alike): requests by endpoint, method and status;
 * fetches by result; publishes, confirmations, mails; 429s by limit. And the
 * process's own gauges: memory and event-loop delay. The store's process
 * adds every process's snapshot to its own for /metrics (gather.ts).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { monitorEventLoopDelay, type IntervalHistogram } from 'node:perf_hooks';
import type { FrontFetch } from '../http/fetch-front.js';
import type { HttpFailure } from '../http/answers.js';
import { metricName } from './catalog.js';
import { Counters, series, type Cell, type Snapshot } from './registry.js';

const REQUESTS = metricName('http_requests_total');
const FETCHES = metricName('fetches_total');
const RATE_LIMITED = metricName('rate_limited_total');
const MAILS = metricName('verification_mails_total');
const MAILS_REFUSED = metricName('verification_mails_refused_total');

/** Request paths as labels: the fixed routes, and templates for the verification and manage links (never a token). */
function endpointOf(url: string | undefined): string {
  const path = url === undefined ? '' : url.split('?', 1)[0]!;
  switch (path) {
    case '/v1/share':
    case '/v1/topology':
    case '/v1/status':
    case '/v1/replicate':
    case '/metrics':
    case '/manage':
    case '/':
      return path;
    default:
      if (path.startsWith('/verify/')) return '/verify/{token}';
      return path.startsWith('/manage/') ? '/manage/{token}' : 'other';
  }
}

const METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS']);

/** The window of the event-loop delay gauges. */
const DELAY_WINDOW_MS = 15_000;
/** How often the event loop is sampled; node records the whole interval, so this much is taken off again. */
const DELAY_RESOLUTION_MS = 10;

export type FetchResult = 'found' | 'pending' | 'missing' | 'expired';

export class ProcessMetrics {
  readonly counters = new Counters();
  readonly publishes: Cell;
  readonly confirmations: Cell;
  readonly fetches: Record<FetchResult, Cell>;
  private readonly requests = new Map<string, Cell>();
  private readonly delay: IntervalHistogram;
  private lastWindow: { p50: number; p99: number; max: number } | undefined;
  private readonly windowTimer: NodeJS.Timeout;
  private readonly startedAt = Date.now();

  /** `process`: the label of this process's gauges, `store` or `fetch-N`. */
  constructor(readonly process: string) {
    const c = this.counters;
    this.publishes = c.cell(metricName('publishes_total'));
    this.confirmations = c.cell(metricName('confirmations_total'));
    this.fetches = {
      found: c.cell(FETCHES, { result: 'found' }),
      pending: c.cell(FETCHES, { result: 'pending' }),
      missing: c.cell(FETCHES, { result: 'missing' }),
      expired: c.cell(FETCHES, { result: 'expired' }),
    };
    for (const limit of ['requests-per-ip', 'emails-per-address', 'emails-per-ip']) c.cell(RATE_LIMITED, { limit });
    for (const result of ['sent', 'printed', 'failed']) c.cell(MAILS, { result });
    for (const limit of ['emails-per-address', 'emails-per-ip']) c.cell(MAILS_REFUSED, { limit });
    this.delay = monitorEventLoopDelay({ resolution: DELAY_RESOLUTION_MS });
    this.delay.enable();
    this.windowTimer = setInterval(() => {
      this.lastWindow = this.delayNow();
      this.delay.reset();
    }, DELAY_WINDOW_MS);
    this.windowTimer.unref();
  }

  /** Wraps a request handler: every answer is counted once it is sent. */
  countRequests(
    handler: (req: IncomingMessage, res: ServerResponse) => void,
  ): (req: IncomingMessage, res: ServerResponse) => void {
    const self = this;
    // One function for every response (no closure per request): `this` is the response.
    function finished(this: ServerResponse): void {
      self.request(this.req.method, this.req.url, this.statusCode).n++;
    }
    return (req, res) => {
      res.on('finish', finished);
      handler(req, res);
    };
  }

  /** Wraps the front's fetch (http/fetch-front.ts): every answer it makes is counted as POST /v1/share. */
  countFront(fetch: FrontFetch): FrontFetch {
    let ok: Cell | undefined;
    return (req, code, fetched, failed) =>
      fetch(
        req,
        code,
        (type, body) => {
          ok ??= this.request('POST', '/v1/share', 200);
          ok.n++;
          fetched(type, body);
        },
        (a) => {
          this.request('POST', '/v1/share', a.status).n++;
          failed(a);
        },
      );
  }

  private request(method: string | undefined, url: string | undefined, status: number): Cell {
    const m = method !== undefined && METHODS.has(method) ? method : 'other';
    const endpoint = endpointOf(url);
    const key = `${endpoint} ${m} ${status}`;
    let cell = this.requests.get(key);
    if (cell === undefined) {
      cell = this.counters.cell(REQUESTS, { endpoint, method: m, status });
      this.requests.set(key, cell);
    }
    return cell;
  }

  /** A failure answered to a caller: 429s are counted by their limit. */
  failed(f: HttpFailure): void {
    if (f.status === 429) this.counters.cell(RATE_LIMITED, { limit: f.limit ?? 'requests-per-ip' }).n++;
  }

  mail(result: 'sent' | 'printed' | 'failed'): void {
    this.counters.cell(MAILS, { result }).n++;
  }

  mailRefused(limit: 'emails-per-address' | 'emails-per-ip'): void {
    this.counters.cell(MAILS_REFUSED, { limit }).n++;
  }

  private delayNow(): { p50: number; p99: number; max: number } {
    const h = this.delay;
    // Before the first sample the histogram answers 0 for percentiles and a huge minimum; report 0.
    if (h.count === 0) return { p50: 0, p99: 0, max: 0 };
    const late = (ns: number) => Math.max(0, ns / 1e6 - DELAY_RESOLUTION_MS) / 1000;
    return { p50: late(h.percentile(50)), p99: late(h.percentile(99)), max: late(h.max) };
  }

  /** This process's gauges, labelled with its name. */
  gauges(): Snapshot {
    const label = { process: this.process };
    const mem = process.memoryUsage();
    const d = this.lastWindow ?? this.delayNow();
    return [
      [series(metricName('start_time_seconds'), label), this.startedAt / 1000],
      [series(metricName('process_resident_memory_bytes'), label), mem.rss],
      [series(metricName('process_heap_used_bytes'), label), mem.heapUsed],
      [series(metricName('event_loop_delay_p50_seconds'), label), d.p50],
      [series(metricName('event_loop_delay_p99_seconds'), label), d.p99],
      [series(metricName('event_loop_delay_max_seconds'), label), d.max],
    ];
  }

  /** What a fetch process sends the store's process. */
  report(): ProcessReport {
    return { counters: this.counters.snapshot(), gauges: this.gauges() };
  }

  close(): void {
    clearInterval(this.windowTimer);
    this.delay.disable();
  }
}

/** A process's counters (summed across processes) and gauges (kept per process). */
export interface ProcessReport {
  counters: Snapshot;
  gauges: Snapshot;
}
