/**
 * `stash get CONTAINER NAME [--version N] --json`: {"container", "name",
 * "value", "changedAt"} (with --version also "version" and "replacedAt"),
 * for scripts that want the change time with the value. JSON
 * holds text, so a value that is not UTF-8 is refused (65) rather than
 * altered. The value must become a JS string to be serialised; that string
 * cannot be wiped (as with env --format json).
 */
import { StashError, UsageError } from '../../errors.js';
import { writeStdout } from '../../output-streams.js';
import { wipeEntries } from '../../vault/container-body.js';
import { readEntriesOf } from '../container-access.js';
import { selectVersion } from './history.js';
import type { Invocation } from '../command-types.js';
import type { Session } from '../session.js';

export async function getJson(
  session: Session,
  container: string,
  name: string,
  values: Invocation['values'],
  version: number | null = null,
): Promise<number> {
  if (values.clip === true || values['clip-seconds'] !== undefined)
    throw new UsageError('--json prints the value; it does not go with --clip');
  const text = await session.withContentKey(container, async (key, info) => {
    const entries = await readEntriesOf(session.dir, info, key);
    try {
      const { value, changedAt, replacedAt } = selectVersion(entries, container, name, version);
      let decoded: string;
      try {
        decoded = new TextDecoder('utf-8', { fatal: true }).decode(value);
      } catch {
        throw new StashError(
          'NOT_UTF8',
          `the value of ${name} is not UTF-8 text, which JSON cannot carry exactly; nothing was printed (use stash get without --json)`,
        );
      }
      const iso = (t: number) => (t > 0 ? new Date(t).toISOString() : null);
      const doc =
        version === null
          ? { container, name, value: decoded, changedAt: iso(changedAt) }
          : { container, name, version, value: decoded, changedAt: iso(changedAt), replacedAt: iso(replacedAt ?? 0) };
      return `${JSON.stringify(doc, null, 2)}\n`;
    } finally {
      wipeEntries(entries);
    }
  });
  await writeStdout(text);
  return 0;
}
