/**
 * The full collection `run` does once the store is recovered: it really
 * collects (an unreachable object is finalized), without putting `gc` in the
 * global scope.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { collectGarbageNow } from '../../src/keyserver/settle-memory.js';

test('collectGarbageNow runs a full collection and leaves no global gc behind', async () => {
  let finalized = false;
  const registry = new FinalizationRegistry(() => {
    finalized = true;
  });
  (() => {
    registry.register({ big: new Array(1000).fill(1) }, 'dropped');
  })();
  assert.ok(collectGarbageNow(), 'this node can collect');
  for (let i = 0; i < 50 && !finalized; i++) await new Promise((r) => setTimeout(r, 10));
  assert.ok(finalized, 'the unreachable object was collected');
  assert.is((globalThis as { gc?: unknown }).gc, undefined, 'gc is not exposed to the server itself');
});

test.run();
