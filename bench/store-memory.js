// Memory of the share index: heap in use and array buffers (the share slabs,
// share-table.ts) after a full collection with an empty store, with 100,000
// verified shares written, and after reopening them from the log, beside the
// RSS of the same process (the store alone: no HTTP, no load). Context for the target
// "server RSS < 100 MB with 100,000 live shares".
//   node bench/store-memory.js           (BENCH_QUICK=1 for a tiny run)
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { conditions, dist, fmt, quick, report } from './lib.js';

const { ShareStore } = await import(dist('keyserver/store/share-store.js'));
const { preloadShares, quietLogger } = await import(dist('keyserver/bench/bench-server.js'));
const { collectGarbage } = await import(dist('keyserver/bench/report.js'));
const { benchPublicKey } = await import(dist('keyserver/bench/requests.js'));
const { defaultConfig } = await import(dist('keyserver/cli/options.js'));

const SHARES = quick ? 2000 : 100000;
const dir = mkdtempSync(join(tmpdir(), 'stash-bench-memory-'));
// Two collections with a turn of the event loop between them: objects with native
// parts (hashes, file handles of the writes) are only released after the first one.
const settled = async () => {
  collectGarbage();
  await new Promise((resolve) => setTimeout(resolve, 100));
  collectGarbage();
  const m = process.memoryUsage();
  return { heap: m.heapUsed, buffers: m.arrayBuffers, rss: m.rss };
};
const open = () =>
  ShareStore.open({
    dir,
    serverId: 0,
    originEpoch: 1,
    compactMinBytes: 1 << 26,
    clock: { now: () => Date.now() },
    logger: quietLogger(),
    sweepIntervalMs: 0,
  });
const perShare = (m, base) => fmt.int((m.heap + m.buffers - base.heap - base.buffers) / SHARES);
// '-': no array buffer left (the slabs of a closed store are freed).
const row = (state, m, base) => [
  state,
  fmt.mb(m.heap),
  m.buffers < 52429 ? '-' : fmt.mb(m.buffers),
  fmt.mb(m.rss),
  base ? perShare(m, base) : '-',
];
try {
  let store = await open();
  const empty = await settled();
  await preloadShares(store, defaultConfig(), SHARES, Array.from({ length: 16 }, benchPublicKey));
  const full = await settled();
  await store.close();
  store = undefined;
  const closed = await settled();
  // A restart: the same shares rebuilt from the log (recovery), in a process that already grew its heap once.
  store = await open();
  const reopened = await settled();
  await store.close();
  report(
    `Share index memory, ${fmt.int(SHARES)} shares`,
    ['state', 'heap in use MB', 'array buffers MB', 'RSS MB', 'bytes per share (heap + array buffers)'],
    [
      row('empty store', empty),
      row(`${fmt.int(SHARES)} verified shares, written`, full, empty),
      row('store closed', closed),
      row(`${fmt.int(SHARES)} verified shares, reopened from the log`, reopened, closed),
    ],
    [
      `command: \`node bench/store-memory.js\` (the store alone, shares written through ShareStore.put + verify, two full GCs a turn apart before each reading; bytes per share include the spare slab capacity)`,
      `conditions: ${conditions()}`,
    ],
  );
} finally {
  rmSync(dir, { recursive: true, force: true });
}
