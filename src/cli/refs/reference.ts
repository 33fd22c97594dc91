/**
 * Secret references: `stash://CONTAINER/PATH` names an entry's value and
 * `stash://CONTAINER/PATH#FIELD` one of its fields, one syntax on the command
 * line (`stash read`), in environment values and dotenv files (`stash run`)
 * and in templates (`stash inject`). Pure parsing, no I/O.
 *
 * Container names hold no '/', entry paths no '#' and no space
 * (src/vault/entry-path.ts), so a reference needs no escaping: the first '/'
 * ends the container, a '#' starts the field. Percent-escapes (`%40`) are
 * still decoded in each part, so that a later, wider name rule needs no new syntax.
 */
import { UsageError } from '../../errors.js';
import { entryPathProblem, FIELD_NAME_RE, FIELD_SEPARATOR, fieldKey } from '../../vault/entry-path.js';
import { type ContainerName, containerNameOrNull } from '../../vault/names.js';

export const SCHEME = 'stash://';

export interface SecretRef {
  /** Checked as the reference was parsed. */
  container: ContainerName;
  /** The entry's path. */
  path: string;
  /** The field named after '#', or null for the entry's value. */
  field: string | null;
  /** What the container stores it under: the path, or PATH#FIELD. */
  key: string;
  /** As written, for messages. */
  text: string;
}

/** True when `text` is meant as a reference (it starts with the scheme). */
export function looksLikeRef(text: string): boolean {
  return text.startsWith(SCHEME);
}

/** Parses one reference; a usage error naming what is wrong. */
export function parseRef(text: string): SecretRef {
  if (!looksLikeRef(text))
    throw new UsageError(`${JSON.stringify(text)} is not a secret reference: write stash://CONTAINER/PATH`);
  const rest = text.slice(SCHEME.length);
  const slash = rest.indexOf('/');
  if (slash < 0) throw new UsageError(`${text}: a reference is stash://CONTAINER/PATH or stash://CONTAINER/PATH#FIELD`);
  const hash = rest.indexOf(FIELD_SEPARATOR, slash);
  let container: string;
  let path: string;
  let field: string | null;
  try {
    container = decodeURIComponent(rest.slice(0, slash));
    path = decodeURIComponent(rest.slice(slash + 1, hash < 0 ? undefined : hash));
    field = hash < 0 ? null : decodeURIComponent(rest.slice(hash + 1));
  } catch {
    throw new UsageError(`${text}: a %-escape is malformed`);
  }
  const name = containerNameOrNull(container);
  if (name === null) throw new UsageError(`${text}: ${JSON.stringify(container)} is not a container name`);
  const problem = entryPathProblem(path);
  if (problem !== null) throw new UsageError(`${text}: ${JSON.stringify(path)} is not an entry path (${problem})`);
  if (field !== null && !FIELD_NAME_RE.test(field))
    throw new UsageError(
      `${text}: ${JSON.stringify(field)} is not a field name (lower-case letters, digits, '_', '-', like username)`,
    );
  return { container: name, path, field, key: field === null ? path : fieldKey(path, field), text };
}

/**
 * One key per value, whatever the spelling of the reference (`stash://c/A`
 * and `stash://c/%41` name the same entry).
 */
export function refKey(ref: SecretRef): string {
  return `${ref.container}/${ref.key}`;
}
