/**
 * Secret references: `stash://CONTAINER/NAME`, one syntax on the command
 * line (`stash read`), in environment values and dotenv files (`stash run`)
 * and in templates (`stash inject`). Pure parsing, no I/O.
 *
 * Container and entry names cannot hold `/` or spaces today (src/vault/names.ts),
 * so a reference needs no escaping; percent-escapes (`%2F`, `%20`) are still
 * decoded, so that a later, wider name rule needs no new syntax.
 */
import { UsageError } from '../../errors.js';
import { CONTAINER_NAME_RE, ENTRY_NAME_RE } from '../../vault/names.js';

export const SCHEME = 'stash://';

export interface SecretRef {
  container: string;
  name: string;
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
    throw new UsageError(`${JSON.stringify(text)} is not a secret reference: write stash://CONTAINER/NAME`);
  const rest = text.slice(SCHEME.length);
  const parts = rest.split('/');
  if (parts.length !== 2) throw new UsageError(`${text}: a reference is stash://CONTAINER/NAME (one /)`);
  let container: string;
  let name: string;
  try {
    container = decodeURIComponent(parts[0]!);
    name = decodeURIComponent(parts[1]!);
  } catch {
    throw new UsageError(`${text}: a %-escape is malformed`);
  }
  if (!CONTAINER_NAME_RE.test(container))
    throw new UsageError(`${text}: ${JSON.stringify(container)} is not a container name`);
  if (!ENTRY_NAME_RE.test(name)) throw new UsageError(`${text}: ${JSON.stringify(name)} is not an entry name`);
  return { container, name, text };
}

/**
 * One key per entry, whatever the spelling of the reference (`stash://c/A`
 * and `stash://c/%41` are the same entry): names cannot hold `/`.
 */
export function refKey(ref: SecretRef): string {
  return `${ref.container}/${ref.name}`;
}
