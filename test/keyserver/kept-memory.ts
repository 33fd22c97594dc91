/**
 * Memory that long-lived tables keep: the tests put slices of node's Buffer
 * pool in and count the array buffers still allocated after a collection.
 */
import { collectGarbageNow } from '../../src/keyserver/settle-memory.js';

/** A copy of `bytes` that is a slice of a pool slab where nothing else lives (the slab's rest is filled first). */
export function lonePooledCopy(bytes: Uint8Array): Buffer {
  Buffer.allocUnsafe(4000).fill(1);
  Buffer.allocUnsafe(4000).fill(2);
  const pooled = Buffer.from(bytes);
  if (!(pooled.buffer.byteLength > pooled.length)) throw new Error('not a slice of a pool slab');
  return pooled;
}

/** A point to count from: array buffers allocated after a full collection. */
export function arrayBuffersNow(): number {
  if (!collectGarbageNow()) throw new Error('this node does not run a full collection on request');
  return process.memoryUsage().arrayBuffers;
}

/**
 * Array buffers allocated since `before`, once garbage is collected; V8 frees
 * dead buffers as it sweeps, which may finish after the collection returns,
 * so this collects again (20 times at most, 50 ms apart) until the figure is
 * below `limit`, and returns the last figure.
 */
export async function arrayBuffersKeptSince(before: number, limit: number): Promise<number> {
  let kept = Number.POSITIVE_INFINITY;
  for (let round = 0; round < 20 && kept >= limit; round++) {
    collectGarbageNow();
    await new Promise((r) => setTimeout(r, 50));
    kept = process.memoryUsage().arrayBuffers - before;
  }
  return kept;
}
