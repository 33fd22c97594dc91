/**
 * `stash get CONTAINER NAME --json`: {"container", "name", "value",
 * "changedAt"}, for scripts that want the change time with the value. JSON
 * holds text, so a value that is not UTF-8 is refused (65) rather than
 * altered. The value must become a JS string to be serialised; that string
 * cannot be wiped (as with env --format json).
 */
import { StashError, UsageError } from '../../errors.js';
import { writeStdout } from '../../output-streams.js';
import { wipeEntries } from '../../vault/container-body.js';
import { changeTime, entryNotFound } from '../../vault/containers.js';
import { readEntriesOf } from '../container-access.js';
import type { Invocation } from '../registry.js';
import type { Session } from '../session.js';

export async function getJson(session: Session, container: string, name: string, values: Invocation['values']): Promise<number> {
  if (values.clip === true || values['clip-seconds'] !== undefined) throw new UsageError('--json prints the value; it does not go with --clip');
  const text = await session.withContentKey(container, async (key, info) => {
    const entries = await readEntriesOf(session.dir, info, key);
    try {
      const value = entries.get(name);
      if (value === undefined) throw entryNotFound(container, name, entries.keys());
      let decoded: string;
      try {
        decoded = new TextDecoder('utf-8', { fatal: true }).decode(value);
      } catch {
        throw new StashError('NOT_UTF8', `the value of ${name} is not UTF-8 text, which JSON cannot carry exactly; nothing was printed (use stash get without --json)`);
      }
      const t = changeTime(entries, name);
      return `${JSON.stringify({ container, name, value: decoded, changedAt: t > 0 ? new Date(t).toISOString() : null }, null, 2)}\n`;
    } finally {
      wipeEntries(entries);
    }
  });
  await writeStdout(text);
  return 0;
}
