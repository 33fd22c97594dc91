/**
 * The store log's group commit with batches in flight at once, on a real file:
 * a second batch is written and synced while the first fdatasync runs, yet
 * every append is acknowledged only after an fdatasync called after its own
 * write, in log order; a failed batch fails those behind it and the file is
 * cut back to the last durable byte. The file handle is the real one with a
 * delay or a failure put in front of a call (a disk error cannot be had on
 * demand); kill -9 of a real server is in crash.test.ts and
 * multi-process.test.ts.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { open, type FileHandle } from 'node:fs/promises';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { LogWriter, MAX_IN_FLIGHT } from '../../src/keyserver/store/log-writer.js';
import { MemoryLogger, tempDir } from './harness.js';

interface Hooks {
  /** Called before each batch's write (which LogWriter makes on the descriptor it reads then); may throw. */
  write?: (n: number) => void;
  /** Called before each datasync; may delay (a promise) or throw. */
  datasync?: (n: number) => Promise<unknown> | undefined;
}

/** The real handle, with the events of each batch's write and datasync in `events` and the hooks run before them. */
function instrumented(handle: FileHandle, events: string[], hooks: Hooks): FileHandle {
  let writes = 0;
  let syncs = 0;
  return new Proxy(handle, {
    get(target, prop, receiver) {
      if (prop === 'fd') {
        const n = ++writes;
        events.push(`write ${n} start`);
        hooks.write?.(n);
        return target.fd;
      }
      if (prop === 'datasync') {
        return async () => {
          const n = ++syncs;
          events.push(`sync ${n} start`);
          await hooks.datasync?.(n);
          await target.datasync();
          events.push(`sync ${n} end`);
        };
      }
      const v = Reflect.get(target, prop, receiver) as unknown;
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
    },
  });
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const record = (i: number) => Buffer.from(`record ${String(i).padStart(4, '0')}\n`);

interface Setup {
  path: string;
  events: string[];
  logger: MemoryLogger;
  writer: LogWriter;
}

/** A LogWriter on a fresh real file behind `hooks`; the file and its folder are removed after `fn`. */
async function withWriter(hooks: Hooks, fn: (s: Setup) => Promise<void>): Promise<void> {
  const dir = tempDir('log-writer');
  const path = join(dir.path, 'store.log');
  const real = await open(path, 'w+');
  const events: string[] = [];
  const logger = new MemoryLogger();
  try {
    await fn({ path, events, logger, writer: new LogWriter(instrumented(real, events, hooks), 0, logger) });
  } finally {
    await real.close().catch(() => {});
    dir.remove();
  }
}

test('a second batch is written and synced while the first fdatasync runs; each append is acknowledged after a sync that followed its write, in order', async () => {
  // The first fdatasync is slow: appends made meanwhile go out as a second batch before it returns.
  await withWriter({ datasync: (n) => (n === 1 ? sleep(150) : undefined) }, async ({ path, events, writer }) => {
    const acked: number[] = [];
    const appends: Array<Promise<void>> = [];
    const applied: number[] = [];
    const add = (i: number) =>
      appends.push(
        writer
          .append(record(i), () => applied.push(i))
          .then(() => {
            acked.push(i);
            events.push(`ack ${i}`);
          }),
      );
    add(0);
    await sleep(30); // batch 1 (record 0) is in its slow fdatasync
    for (let i = 1; i <= 5; i++) add(i);
    await sleep(30); // batch 2 (records 1-5) started meanwhile
    for (let i = 6; i <= 8; i++) add(i); // a third waits: at most MAX_IN_FLIGHT batches at once
    await Promise.all(appends);
    assert.is(MAX_IN_FLIGHT, 2);
    assert.ok(
      events.indexOf('write 2 start') < events.indexOf('sync 1 end'),
      `batch 2 written during sync 1: ${events.join(', ')}`,
    );
    assert.ok(
      events.indexOf('write 3 start') > events.indexOf('sync 1 end'),
      `batch 3 only once a batch returned: ${events.join(', ')}`,
    );
    assert.equal(acked, [0, 1, 2, 3, 4, 5, 6, 7, 8], 'acknowledged in log order');
    assert.equal(applied, acked, 'onDurable in log order');
    // Record i is in batch b(i); its acknowledgement follows the end of an fdatasync that started after its write ended.
    const batchOf = (i: number) => (i === 0 ? 1 : i <= 5 ? 2 : 3);
    for (let i = 0; i <= 8; i++) {
      const b = batchOf(i);
      const ack = events.indexOf(`ack ${i}`);
      assert.ok(events.indexOf(`write ${b} start`) < events.indexOf(`sync ${b} start`), `sync ${b} follows write ${b}`);
      assert.ok(
        events.indexOf(`sync ${b} end`) < ack,
        `record ${i} acknowledged after sync ${b}: ${events.join(', ')}`,
      );
    }
    assert.is(
      writer.size,
      Array.from({ length: 9 }, (_, i) => record(i).length).reduce((a, b) => a + b),
    );
    await writer.close();
    assert.is(readFileSync(path, 'utf8'), Array.from({ length: 9 }, (_, i) => record(i).toString()).join(''));
  });
});

test('a failed write fails its batch; the durable one before it stays, the file is cut back, and what was queued meanwhile follows the durable batch', async () => {
  // Batch 1 syncs slowly; batch 2's write fails (EIO) meanwhile; the third append waits (two batches in flight) and starts after the cut.
  const hooks: Hooks = {
    datasync: (n) => (n === 1 ? sleep(150) : undefined),
    write: (n) => {
      if (n === 2) throw Object.assign(new Error('EIO: i/o error, write'), { code: 'EIO' });
    },
  };
  await withWriter(hooks, async ({ path, events, logger, writer }) => {
    const first = writer.append(record(1));
    await sleep(30);
    const second = writer.append(record(2));
    await sleep(30);
    const third = writer.append(record(3));
    const outcomes = await Promise.allSettled([first, second, third]);
    assert.equal(
      outcomes.map((o) => o.status),
      ['fulfilled', 'rejected', 'fulfilled'],
    );
    assert.is(((outcomes[1] as PromiseRejectedResult).reason as { code?: string }).code, 'STORE_UNAVAILABLE');
    assert.ok(
      logger.lines.some((l) => l.includes(`cutting the log back to ${record(1).length} bytes`)),
      logger.lines.join('\n'),
    );
    assert.ok(
      events.indexOf('write 3 start') > events.indexOf('sync 1 end'),
      `the third batch started after the cut: ${events.join(', ')}`,
    );
    await writer.close();
    assert.is(
      readFileSync(path, 'utf8'),
      `${record(1)}${record(3)}`,
      'the failed batch is gone, the next one right after the durable one',
    );
  });
});

test('an fdatasync that fails fails its batch even when the batch behind it synced', async () => {
  const hooks: Hooks = {
    datasync: async (n) => {
      if (n === 1) {
        await sleep(150);
        throw Object.assign(new Error('EIO: i/o error, fdatasync'), { code: 'EIO' });
      }
    },
  };
  await withWriter(hooks, async ({ path, events, writer }) => {
    const first = writer.append(record(1));
    await sleep(30);
    const second = writer.append(record(2));
    const outcomes = await Promise.allSettled([first, second]);
    assert.ok(events.includes('sync 2 end'), `batch 2 was written and synced: ${events.join(', ')}`);
    assert.equal(
      outcomes.map((o) => o.status),
      ['rejected', 'rejected'],
    );
    assert.is(writer.size, 0);
    assert.is(readFileSync(path, 'utf8'), '');
    await writer.append(record(3));
    await writer.close();
    assert.is(readFileSync(path, 'utf8'), record(3).toString());
  });
});

test('an exclusive section waits for every batch in flight, and no batch starts during it', async () => {
  await withWriter({ datasync: () => sleep(40) }, async ({ events, writer }) => {
    const appends = [writer.append(record(1))];
    await sleep(10);
    appends.push(writer.append(record(2)));
    await sleep(10);
    const section = writer.exclusive(async () => {
      events.push('exclusive start');
      await sleep(50);
      events.push('exclusive end');
      return writer.size;
    });
    appends.push(writer.append(record(3)));
    const sizeInside = await section;
    await Promise.all(appends);
    assert.is(
      sizeInside,
      record(1).length + record(2).length,
      'both batches in flight were durable before the section',
    );
    const start = events.indexOf('exclusive start');
    assert.ok(events.indexOf('sync 2 end') < start, events.join(', '));
    assert.ok(events.indexOf('write 3 start') > events.indexOf('exclusive end'), events.join(', '));
    await writer.close();
  });
});

test.run();
