/**
 * Resolving many references at once: each container is opened once (one
 * password prompt at most, then the agent), every value is checked to exist
 * before any is used, and the values come back in secure memory.
 */
import { StashError } from '../../errors.js';
import { wipeEntries } from '../../vault/container-body.js';
import { entryNotFound } from '../../vault/containers.js';
import { secureCopy, wipe } from '../../vault/secure.js';
import { readEntriesOf } from '../container-access.js';
import type { Session } from '../session.js';
import type { SecretRef } from './reference.js';

/** Values by reference text (release with wipeResolved()). */
export type Resolved = Map<string, Buffer>;

/**
 * The value of every reference. An unknown container or entry throws before
 * anything is returned (nothing runs half-configured), naming the reference.
 */
export async function resolveRefs(session: Session, refs: readonly SecretRef[]): Promise<Resolved> {
  const byContainer = new Map<string, SecretRef[]>();
  for (const r of refs) byContainer.set(r.container, [...(byContainer.get(r.container) ?? []), r]);
  const out: Resolved = new Map();
  try {
    for (const [container, wanted] of byContainer) {
      await session.withContentKey(container, async (key, info) => {
        const entries = await readEntriesOf(session.dir, info, key);
        try {
          for (const r of wanted) {
            const value = entries.get(r.name);
            if (value === undefined) {
              const err = entryNotFound(container, r.name, entries.keys());
              throw Object.assign(new StashError('ENTRY_NOT_FOUND', `${r.text}: ${err.message}`), {
                misspelt: err.misspelt,
              });
            }
            if (!out.has(r.text)) out.set(r.text, secureCopy(value));
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
