/**
 * `stash get [CONTAINER] PATH [--version N] --json`: {"container", "name",
 * "value", "changedAt", "fields"} (with --version also "version" and
 * "replacedAt", and no fields; with --field NAME, "field" and that field's
 * value instead), for scripts that want the change time with the value. JSON
 * holds text, so a value that is not UTF-8 is refused (65) rather than
 * altered. The value must become a JS string to be serialised; that string
 * cannot be wiped (as with env --format json).
 */
import { StashError, UsageError } from '../../errors.js';
import { writeStdout } from '../../output-streams.js';
import { wipeEntries, type Entries } from '../../vault/container-body.js';
import { type EntryPath, fieldKey, fieldsOf } from '../../vault/entry-path.js';
import type { ContainerName } from '../../vault/names.js';
import { readEntriesOf } from '../container-access.js';
import { selectVersion } from './history.js';
import type { Invocation } from '../command-types.js';
import type { Session } from '../session.js';

/** `value` as text; NOT_UTF8 (nothing printed) when it is not UTF-8. */
function utf8(value: Uint8Array, what: string): string {
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(value);
  } catch {
    throw new StashError(
      'NOT_UTF8',
      `${what} is not UTF-8 text, which JSON cannot carry exactly; nothing was printed (use stash get without --json)`,
    );
  }
}

/** Every field of `path`, by name, as text. */
function fieldTexts(entries: Entries, path: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const f of fieldsOf(entries.keys(), path))
    out[f] = utf8(entries.get(fieldKey(path, f))!, `field ${f} of ${path}`);
  return out;
}

export async function getJson(
  session: Session,
  container: ContainerName,
  path: EntryPath,
  field: string | null,
  values: Invocation['values'],
  version: number | null = null,
): Promise<number> {
  if (values.clip === true || values['clip-seconds'] !== undefined)
    throw new UsageError('--json prints the value; it does not go with --clip');
  const name = field === null ? path : fieldKey(path, field);
  const text = await session.withContentKey(container, async (key, info) => {
    const entries = await readEntriesOf(session.dir, info, key);
    try {
      const { value, changedAt, replacedAt } = selectVersion(entries, container, name, version);
      const decoded = utf8(value, field === null ? `the value of ${path}` : `field ${field} of ${path}`);
      const iso = (t: number) => (t > 0 ? new Date(t).toISOString() : null);
      const head = field === null ? { container, name: path } : { container, name: path, field };
      const doc =
        version === null
          ? {
              ...head,
              value: decoded,
              changedAt: iso(changedAt),
              ...(field === null ? { fields: fieldTexts(entries, path) } : {}),
            }
          : { ...head, version, value: decoded, changedAt: iso(changedAt), replacedAt: iso(replacedAt ?? 0) };
      return `${JSON.stringify(doc, null, 2)}\n`;
    } finally {
      wipeEntries(entries);
    }
  });
  await writeStdout(text);
  return 0;
}
