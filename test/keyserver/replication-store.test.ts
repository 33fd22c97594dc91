/**
 * The replication state of the store without HTTP: what is pending for a
 * peer, acknowledgements, and both surviving a restart and a compaction
 * (the compacted log keeps the acks and the stamps of fetch counts, so a
 * restart resends exactly what was not acknowledged).
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { createHash, randomBytes } from 'node:crypto';
import { ShareStore, type StoreOptions } from '../../src/keyserver/store/share-store.js';
import { generateShareCode } from '../../src/keyserver/share-code.js';
import { ManualClock, MemoryLogger, identityPublicKey, tempDir } from './harness.js';

const key = identityPublicKey();
const PEER = 'http://127.0.0.1:1/v1/replicate';

function options(dir: string, clock: ManualClock): StoreOptions {
  return {
    dir,
    serverId: 0,
    originEpoch: 1,
    compactMinBytes: 1 << 30,
    clock,
    logger: new MemoryLogger(),
    sweepIntervalMs: 0,
    fetchFlushMs: 1,
  };
}

async function put(store: ShareStore, clock: ManualClock): Promise<string> {
  const code = generateShareCode(0, 1).canonical;
  await store.put({
    code,
    publicKey: key,
    email: 'x@example.org',
    createdAt: clock.now(),
    expiresAt: clock.now() + 900_000,
    tokenHash: createHash('sha256').update(randomBytes(32)).digest(),
  });
  return code;
}

const pendingKeys = (store: ShareStore) =>
  store
    .pendingFor(PEER)
    .map((p) => `${p.kind}:${p.code}:${p.stamp.seq}`)
    .sort();

test('pending items, acknowledgements and fetch stamps survive a restart and a compaction', async () => {
  const dir = tempDir('repl-store');
  const clock = new ManualClock();
  try {
    let store = await ShareStore.open(options(dir.path, clock));
    const changes: string[] = [];
    store.onChange((c) => changes.push(`${c.kind}:${c.code}`));
    const [a, b, c] = [await put(store, clock), await put(store, clock), await put(store, clock)];
    assert.equal(changes, [`share:${a}`, `share:${b}`, `share:${c}`]);
    assert.is(pendingKeys(store).length, 3);
    // The peer acknowledged a and b (stamps 1 and 2).
    await store.recordAck(
      PEER,
      store
        .pendingFor(PEER)
        .filter((p) => p.code !== c)
        .map((p) => p.stamp),
    );
    assert.equal(
      store.pendingFor(PEER).map((p) => p.code),
      [c],
    );
    await store.close();

    store = await ShareStore.open(options(dir.path, clock));
    const before = pendingKeys(store);
    assert.equal(
      before.map((k) => k.split(':')[1]),
      [c],
      'after a restart only c is pending',
    );
    assert.is(store.ackedSequence(PEER, 0), 2);
    const result = await store.compact();
    assert.ok(result && result.shares === 3);
    await store.close();

    store = await ShareStore.open(options(dir.path, clock));
    assert.equal(pendingKeys(store), before, 'the compacted log keeps the acknowledgements');
    assert.is(store.ackedSequence(PEER, 0), 2);
    assert.is(store.stats().lastSequence, 3, 'an acknowledgement takes no sequence number');
    await store.close();
  } finally {
    dir.remove();
  }
});

test('remote events: applied once, a fetch count keeps its stamp through compaction, own-origin stamps move the sequence on', async () => {
  const dir = tempDir('repl-remote');
  const clock = new ManualClock();
  try {
    let store = await ShareStore.open(options(dir.path, clock));
    const code = generateShareCode(1, 0).canonical;
    const stamp = { origin: 1, epoch: 5, seq: 10 };
    const share = {
      code,
      publicKey: key,
      email: 'r@example.org',
      createdAt: clock.now(),
      expiresAt: clock.now() + 900_000,
      verifiedAt: clock.now(),
      fetchCount: 0,
      tokenHash: undefined,
      stamp,
    };
    assert.is((await store.applyRemote([{ type: 'putShare', stamp, share }])).applied, 1);
    assert.is(
      (await store.applyRemote([{ type: 'putShare', stamp, share }])).applied,
      0,
      'the same event again changes nothing',
    );
    const fetchStamp = { origin: 1, epoch: 5, seq: 11 };
    assert.is((await store.applyRemote([{ type: 'fetchCount', stamp: fetchStamp, code, fetchCount: 4 }])).applied, 1);
    assert.is(
      (await store.applyRemote([{ type: 'fetchCount', stamp: { ...fetchStamp, seq: 12 }, code, fetchCount: 3 }]))
        .applied,
      0,
      'counts merge by maximum',
    );
    // A new share and its fetch count in one batch: both count.
    const both = generateShareCode(1, 0).canonical;
    const bothStamp = { origin: 1, epoch: 5, seq: 20 };
    const r = await store.applyRemote([
      { type: 'putShare', stamp: bothStamp, share: { ...share, code: both, stamp: bothStamp } },
      { type: 'fetchCount', stamp: { ...bothStamp, seq: 21 }, code: both, fetchCount: 2 },
    ]);
    assert.is(r.applied, 2);
    const l = store.lookup(both);
    assert.is(l.state === 'live' ? l.share.fetchCount : -1, 2);
    // An expired share arriving late is dropped.
    const old = generateShareCode(1, 0).canonical;
    assert.is(
      (
        await store.applyRemote([
          {
            type: 'putShare',
            stamp: { ...stamp, seq: 13 },
            share: { ...share, code: old, expiresAt: clock.now() - 1 },
          },
        ])
      ).applied,
      0,
    );
    // Our own event handed back by a peer (we lost it): taken, and our sequence continues after it.
    const mine = generateShareCode(0, 1).canonical;
    await store.applyRemote([
      {
        type: 'putShare',
        stamp: { origin: 0, epoch: 1, seq: 40 },
        share: { ...share, code: mine, stamp: { origin: 0, epoch: 1, seq: 40 } },
      },
    ]);
    assert.is(store.stats().lastSequence, 40);
    await store.compact();
    await store.close();
    store = await ShareStore.open(options(dir.path, clock));
    const ev = store.eventFor({ kind: 'fetch', code });
    assert.equal(ev && ev.type === 'fetchCount' ? [ev.fetchCount, ev.stamp] : undefined, [4, fetchStamp]);
    assert.is(store.stats().originHigh.get(1)!.seq, 21, 'the highest stamp of origin 1 still held');
    await store.close();
  } finally {
    dir.remove();
  }
});

test.run();
