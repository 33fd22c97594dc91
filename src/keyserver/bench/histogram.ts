/**
 * A latency histogram with log-linear buckets (64 per power of two, so a
 * percentile is within about 1.1% of the true value), from 1 microsecond to
 * about 18 minutes, in constant memory. Histograms merge by adding counts, so
 * a load generator in another process can send its counts over IPC.
 */
const SUB_BUCKETS = 64;
const MAX_EXPONENT = 30;
const BUCKETS = (MAX_EXPONENT + 1) * SUB_BUCKETS + 1;

/** Bucket of a latency in microseconds (bucket 0 holds everything below 1 us). */
function bucketOf(us: number): number {
  if (!(us >= 1)) return 0;
  const exponent = Math.min(MAX_EXPONENT, Math.floor(Math.log2(us)));
  const base = 2 ** exponent;
  const sub = Math.min(SUB_BUCKETS - 1, Math.floor(((us - base) / base) * SUB_BUCKETS));
  return 1 + exponent * SUB_BUCKETS + sub;
}

/** Middle of a bucket in microseconds. */
function bucketMiddle(bucket: number): number {
  if (bucket === 0) return 0.5;
  const exponent = Math.floor((bucket - 1) / SUB_BUCKETS);
  const sub = (bucket - 1) % SUB_BUCKETS;
  const base = 2 ** exponent;
  return base + ((sub + 0.5) / SUB_BUCKETS) * base;
}

/** What travels between processes. */
export interface HistogramData {
  counts: number[];
  count: number;
  min: number;
  max: number;
  sum: number;
}

export class LatencyHistogram {
  private counts = new Float64Array(BUCKETS);
  count = 0;
  min = Infinity;
  max = 0;
  sum = 0;

  /** Records one latency in microseconds. */
  record(us: number): void {
    this.counts[bucketOf(us)]!++;
    this.count++;
    this.sum += us;
    if (us < this.min) this.min = us;
    if (us > this.max) this.max = us;
  }

  merge(other: HistogramData): void {
    other.counts.forEach((c, i) => {
      if (i < BUCKETS) this.counts[i]! += c;
    });
    this.count += other.count;
    this.sum += other.sum;
    this.min = Math.min(this.min, other.min);
    this.max = Math.max(this.max, other.max);
  }

  /** The p-th percentile (0 < p <= 100) in microseconds; 0 when empty. */
  percentile(p: number): number {
    if (this.count === 0) return 0;
    const rank = Math.max(1, Math.ceil((p / 100) * this.count));
    let seen = 0;
    for (let i = 0; i < BUCKETS; i++) {
      seen += this.counts[i]!;
      if (seen >= rank) return Math.min(this.max, Math.max(this.min, bucketMiddle(i)));
    }
    return this.max;
  }

  mean(): number {
    return this.count === 0 ? 0 : this.sum / this.count;
  }

  toData(): HistogramData {
    return { counts: Array.from(this.counts), count: this.count, min: this.min, max: this.max, sum: this.sum };
  }

  static fromData(data: HistogramData): LatencyHistogram {
    const h = new LatencyHistogram();
    h.merge(data);
    return h;
  }
}
