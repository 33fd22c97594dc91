/**
 * One full garbage collection, run once the server has recovered its store:
 * reading a large log leaves tens of MB of garbage on the V8 heap (records
 * decoded and dropped), which V8 would otherwise keep resident until its
 * memory reducer runs, seconds into serving. Collecting it before the first
 * request makes the resident size after a restart the same from run to run
 * (docs/operations.md, "Memory").
 *
 * `gc` is exposed in a throw-away context only, not in the server's own
 * global scope. A node that refuses the flag just skips the collection.
 */
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

/** Runs a full collection; false when this node cannot. */
export function collectGarbageNow(): boolean {
  try {
    setFlagsFromString('--expose-gc');
    const gc: unknown = runInNewContext('gc');
    if (typeof gc !== 'function') return false;
    gc();
    return true;
  } catch {
    return false;
  }
}
