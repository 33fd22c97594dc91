/**
 * Resolving many references at once: each container is opened once (one
 * password prompt at most, then the agent), every value is checked to exist
 * before any is used, and the values come back in secure memory.
 */
import type { ContainerName } from '../../vault/names.js';
import { StashError } from '../../errors.js';
import { wipeEntries } from '../../vault/container-body.js';
import { entryNotFound } from '../../vault/containers.js';
import { secureCopy, wipe } from '../../vault/secure.js';
import { readEntriesOf } from '../container-access.js';
import type { Session } from '../session.js';
import { refKey, type SecretRef } from './reference.js';

/** Values by entry, refKey() of a reference (release with wipeResolved()). */
export type Resolved = Map<string, Buffer>;

/** The value of `ref` in `values` (resolveRefs() returned one for every reference it was given). */
export function resolvedValue(values: Resolved, ref: SecretRef): Buffer {
  return values.get(refKey(ref))!;
}

/**
 * The value of every reference, each entry read once however many
 * references name it. An unknown container or entry throws before anything
 * is returned (nothing runs half-configured), naming the first reference to it.
 */
export async function resolveRefs(session: Session, refs: Iterable<SecretRef>): Promise<Resolved> {
  // Grouped by container, one reference per entry: linear in the references (a copy of each
  // container's list per reference made 20,000 references cost 15.9 CPU-s, issue 40).
  const byContainer = new Map<ContainerName, Map<string, SecretRef>>();
  for (const r of refs) {
    let wanted = byContainer.get(r.container);
    if (wanted === undefined) {
      wanted = new Map();
      byContainer.set(r.container, wanted);
    }
    if (!wanted.has(r.key)) wanted.set(r.key, r);
  }
  const out: Resolved = new Map();
  try {
    for (const [container, wanted] of byContainer) {
      await session.withContentKey(container, async (key, info) => {
        const entries = await readEntriesOf(session.dir, info, key);
        try {
          for (const r of wanted.values()) {
            const value = entries.get(r.key);
            if (value === undefined) {
              const err = entryNotFound(container, r.key, entries.keys());
              throw Object.assign(new StashError('ENTRY_NOT_FOUND', `${r.text}: ${err.message}`), {
                misspelt: err.misspelt,
              });
            }
            out.set(refKey(r), secureCopy(value));
          }
        } finally {
          wipeEntries(entries);
        }
      });
    }
    return out;
  } catch (err) {
    wipeResolved(out);
    throw err;
  }
}

export function wipeResolved(values: Resolved): void {
  for (const v of values.values()) wipe(v);
  values.clear();
}
