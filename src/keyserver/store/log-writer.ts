/**
 * Group-committed appends to the store log. Records appended while batches
 * are in flight are collected and committed together by the next one (one
 * write, one fdatasync per batch), so durable throughput grows with load
 * while an idle server still commits a lone record at once.
 *
 * Up to MAX_IN_FLIGHT batches are in flight at once: the next one is written
 * and its fdatasync called while the previous fdatasync still runs. Linux
 * completes overlapping fdatasync calls of one file together (the journal
 * commits what both wrote), so a record waits for about one commit instead of
 * the rest of the running one and then its own (commits per second on this
 * machine's disk: 560 one at a time, 4,554 two at a time). Each batch is still
 * acknowledged only once an fdatasync called after its own write has
 * returned, and only after every batch before it: batches complete in log
 * order, whatever order their system calls return in.
 *
 * `onDurable` callbacks run synchronously, in log order, once their batch and
 * every batch before it are durable, and before an exclusive section runs:
 * whoever updates the in-memory index there sees exactly the records on disk,
 * in order. `exclusive()` gives compaction a moment where no batch is in
 * flight and nothing new is written.
 *
 * A failed write or fdatasync fails its batch and every batch after it (they
 * may sit behind a hole); once all in flight have returned, the file is cut
 * off again (ftruncate to the end of the last durable batch) so a later batch
 * never lands behind a torn record; if even that fails the writer refuses all
 * further appends (STORE_UNAVAILABLE) until restart, when recovery cuts the
 * tail.
 *
 * An append that would take the file past `limitBytes` (the disk cap's share
 * for store.log, disk/budget.ts) is refused before anything is written
 * (STORE_FULL), so the log and a compaction's second file always fit in it.
 */
import { writeSync } from 'node:fs';
import type { FileHandle } from 'node:fs/promises';
import { StoreFullError, StoreUnavailableError } from '../errors.js';

/** Batches written and being synced at once; the rest of libuv's 4 threads stay free for other file work. */
export const MAX_IN_FLIGHT = 2;

interface Pending {
  data: Buffer;
  onDurable: (() => void) | undefined;
  resolve: () => void;
  reject: (err: Error) => void;
}

interface Flight {
  batch: Pending[];
  bytes: number;
  /** Set once its write and fdatasync returned: undefined while in flight, null when both succeeded. */
  outcome: Error | null | undefined;
}

export interface WriterLogger {
  error(message: string): void;
}

export class LogWriter {
  private queue: Pending[] = [];
  /** Batches started and not yet completed, in log order. */
  private flights: Flight[] = [];
  /** Where the next batch is written: the committed size plus every batch in flight. */
  private end: number;
  /** A batch failed: no new one starts until those in flight have returned and the file is cut back. */
  private failing = false;
  private exclusiveHeld = false;
  private scheduled = false;
  private broken: Error | undefined;
  private closed = false;
  private waiters: Array<() => void> = [];
  private idleWaiters: Array<() => void> = [];
  /** Bytes appended and not yet committed (queued or in flight). */
  private accepted = 0;
  /** Committed batches (for tests and status). */
  batches = 0;
  /** Appends refused because they would have passed limitBytes. */
  refusedFull = 0;

  constructor(
    private handle: FileHandle,
    private committed: number,
    private readonly logger: WriterLogger,
    public limitBytes = Number.POSITIVE_INFINITY,
  ) {
    this.end = committed;
  }

  /** Bytes durably in the file. */
  get size(): number {
    return this.committed;
  }

  /** Bytes the file will hold once every append made so far is committed. */
  get sizeAccepted(): number {
    return this.committed + this.accepted;
  }

  /** Resolves once `data` is written and fdatasync'ed; `onDurable` runs first. */
  append(data: Buffer, onDurable?: () => void): Promise<void> {
    if (this.closed) return Promise.reject(new StoreUnavailableError('the store is closed'));
    if (this.broken) return Promise.reject(new StoreUnavailableError(undefined, this.broken));
    if (this.committed + this.accepted + data.length > this.limitBytes) {
      this.refusedFull++;
      return Promise.reject(
        new StoreFullError(`store.log may hold at most ${this.limitBytes} bytes under the disk cap`),
      );
    }
    this.accepted += data.length;
    return new Promise<void>((resolve, reject) => {
      this.queue.push({ data, onDurable, resolve, reject });
      this.schedule();
    });
  }

  /** A batch is in flight, or failed ones are being cut back. */
  private get inFlight(): boolean {
    return this.flights.length > 0 || this.failing;
  }

  private schedule(): void {
    if (this.scheduled || this.queue.length === 0 || !this.mayStart()) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      this.start();
    });
  }

  /** An exclusive section waiting for the batches in flight goes first: no new one starts meanwhile. */
  private mayStart(): boolean {
    return (
      !this.exclusiveHeld &&
      this.waiters.length === 0 &&
      !this.failing &&
      this.broken === undefined &&
      this.flights.length < MAX_IN_FLIGHT
    );
  }

  /** Starts a batch of everything queued: its position is taken now, its write and fdatasync run meanwhile. */
  private start(): void {
    if (this.queue.length === 0 || !this.mayStart()) return;
    const batch = this.queue;
    this.queue = [];
    const data = batch.length === 1 ? batch[0]!.data : Buffer.concat(batch.map((p) => p.data));
    const flight: Flight = { batch, bytes: data.length, outcome: undefined };
    const at = this.end;
    this.end += data.length;
    this.flights.push(flight);
    void this.writeAndSync(data, at).then(
      () => this.settle(flight, null),
      (err: unknown) => this.settle(flight, err instanceof Error ? err : new Error(String(err))),
    );
    // A second batch may start at once if more was queued meanwhile.
    this.schedule();
  }

  /**
   * The write goes to the page cache at once, on this thread (a few KiB: some
   * microseconds; through the thread pool it cost a round trip and 8% of a
   * flow run's main-thread profile); the fdatasync runs in the thread pool.
   */
  private async writeAndSync(data: Buffer, at: number): Promise<void> {
    const fd = this.handle.fd;
    let written = 0;
    while (written < data.length) written += writeSync(fd, data, written, data.length - written, at + written);
    await this.handle.datasync();
  }

  /** One batch returned: completes, in log order, every batch whose predecessors are done. */
  private settle(flight: Flight, outcome: Error | null): void {
    flight.outcome = outcome;
    if (outcome !== null) this.failing = true;
    while (this.flights.length > 0 && this.flights[0]!.outcome === null) this.complete(this.flights.shift()!);
    if (this.failing) {
      // The first one left failed: it and those after it (they may sit behind a hole) fail together
      // once none is in flight, and the file is cut back to what is durable.
      if (this.flights.length > 0 && this.flights.every((f) => f.outcome !== undefined)) void this.failRest();
      return;
    }
    this.afterBatch();
  }

  private complete(flight: Flight): void {
    this.committed += flight.bytes;
    this.accepted -= flight.bytes;
    this.batches++;
    for (const p of flight.batch) {
      try {
        p.onDurable?.();
      } catch (err) {
        this.logger.error(
          `store: applying a durable record failed: ${err instanceof Error ? err.message : String(err)}`,
        );
      }
    }
    for (const p of flight.batch) p.resolve();
  }

  private async failRest(): Promise<void> {
    const failed = this.flights.splice(0);
    const cause = failed.find((f) => f.outcome !== null)!.outcome!;
    await this.cutBack(cause);
    const failure = new StoreUnavailableError(undefined, cause);
    for (const f of failed) {
      this.accepted -= f.bytes;
      for (const p of f.batch) p.reject(failure);
    }
    this.end = this.committed;
    this.failing = false;
    this.afterBatch();
  }

  private async cutBack(err: unknown): Promise<void> {
    this.logger.error(
      `store: write failed (${err instanceof Error ? err.message : String(err)}); cutting the log back to ${this.committed} bytes`,
    );
    try {
      await this.handle.truncate(this.committed);
      await this.handle.datasync();
    } catch (truncErr) {
      this.broken = truncErr instanceof Error ? truncErr : new Error(String(truncErr));
      this.logger.error(`store: cannot cut the log back (${this.broken.message}); refusing writes until restart`);
      for (const p of this.queue.splice(0)) {
        this.accepted -= p.data.length;
        p.reject(new StoreUnavailableError(undefined, this.broken));
      }
    }
  }

  private afterBatch(): void {
    if (this.inFlight) {
      this.schedule();
      return;
    }
    const next = this.waiters.shift();
    if (next) {
      next();
      return;
    }
    if (this.queue.length > 0) {
      this.schedule();
      return;
    }
    for (const w of this.idleWaiters.splice(0)) w();
  }

  /**
   * Runs `fn` while no batch is in flight and none starts; appends made
   * meanwhile wait and are committed afterwards (to the new file, if `fn`
   * called `replaceFile`).
   */
  async exclusive<T>(fn: () => Promise<T>): Promise<T> {
    if (this.inFlight || this.exclusiveHeld) await new Promise<void>((r) => this.waiters.push(r));
    this.exclusiveHeld = true;
    try {
      return await fn();
    } finally {
      this.exclusiveHeld = false;
      this.afterBatch();
    }
  }

  /** Inside `exclusive` only: continue appending to another (already synced) file. */
  replaceFile(handle: FileHandle, size: number): FileHandle {
    if (!this.exclusiveHeld) throw new Error('replaceFile outside exclusive()');
    const old = this.handle;
    this.handle = handle;
    this.committed = size;
    this.end = size;
    return old;
  }

  /** The current file handle (read-only use inside `exclusive`). */
  get file(): FileHandle {
    return this.handle;
  }

  /** Resolves when every append made so far has been committed or failed. */
  async drain(): Promise<void> {
    while (this.inFlight || this.exclusiveHeld || this.queue.length > 0 || this.scheduled) {
      await new Promise<void>((r) => this.idleWaiters.push(r));
    }
  }

  /** Commits what is queued, then closes the file. */
  async close(): Promise<void> {
    if (this.closed) return;
    await this.drain();
    this.closed = true;
    await this.handle.close();
  }
}
