/**
 * Group-committed appends to the store log. Records appended while a write +
 * fdatasync is in flight are collected and committed together by the next one
 * (one write, one fdatasync per batch), so durable throughput grows with load
 * while an idle server still commits a lone record at once.
 *
 * `onDurable` callbacks run synchronously right after the fdatasync, before the
 * next batch starts or an exclusive section runs: whoever updates the
 * in-memory index there sees exactly the records on disk. `exclusive()` gives
 * compaction a moment where no batch is in flight and nothing new is written.
 *
 * A failed write is cut off again (ftruncate to the last committed size) so a
 * later batch never lands behind a torn record; if even that fails the writer
 * refuses all further appends (STORE_UNAVAILABLE) until restart, when recovery
 * cuts the tail.
 *
 * An append that would take the file past `limitBytes` (the disk cap's share
 * for store.log, disk/budget.ts) is refused before anything is written
 * (STORE_FULL), so the log and a compaction's second file always fit in it.
 */
import type { FileHandle } from 'node:fs/promises';
import { StoreFullError, StoreUnavailableError } from '../errors.js';

interface Pending {
  data: Buffer;
  onDurable: (() => void) | undefined;
  resolve: () => void;
  reject: (err: Error) => void;
}

export interface WriterLogger {
  error(message: string): void;
}

export class LogWriter {
  private queue: Pending[] = [];
  private flushing = false;
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
  ) {}

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
      return Promise.reject(new StoreFullError(`store.log may hold at most ${this.limitBytes} bytes under the disk cap`));
    }
    this.accepted += data.length;
    return new Promise<void>((resolve, reject) => {
      this.queue.push({ data, onDurable, resolve, reject });
      this.schedule();
    });
  }

  private schedule(): void {
    if (this.scheduled || this.flushing || this.exclusiveHeld || this.queue.length === 0) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      void this.flush();
    });
  }

  private async flush(): Promise<void> {
    if (this.flushing || this.exclusiveHeld || this.queue.length === 0) return;
    this.flushing = true;
    const batch = this.queue;
    this.queue = [];
    const data = batch.length === 1 ? batch[0]!.data : Buffer.concat(batch.map((p) => p.data));
    this.accepted -= data.length;
    try {
      let written = 0;
      while (written < data.length) {
        const r = await this.handle.write(data, written, data.length - written, this.committed + written);
        written += r.bytesWritten;
      }
      await this.handle.datasync();
      this.committed += data.length;
      this.batches++;
      for (const p of batch) {
        try {
          p.onDurable?.();
        } catch (err) {
          this.logger.error(`store: applying a durable record failed: ${err instanceof Error ? err.message : String(err)}`);
        }
      }
      for (const p of batch) p.resolve();
    } catch (err) {
      await this.cutBack(err);
      const failure = new StoreUnavailableError(undefined, err);
      for (const p of batch) p.reject(failure);
    } finally {
      this.flushing = false;
      this.afterBatch();
    }
  }

  private async cutBack(err: unknown): Promise<void> {
    this.logger.error(`store: write failed (${err instanceof Error ? err.message : String(err)}); cutting the log back to ${this.committed} bytes`);
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
    if (this.flushing || this.exclusiveHeld) await new Promise<void>((r) => this.waiters.push(r));
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
    return old;
  }

  /** The current file handle (read-only use inside `exclusive`). */
  get file(): FileHandle {
    return this.handle;
  }

  /** Resolves when every append made so far has been committed or failed. */
  async drain(): Promise<void> {
    while (this.flushing || this.exclusiveHeld || this.queue.length > 0 || this.scheduled) {
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
