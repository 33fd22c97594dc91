/**
 * `stash set CONTAINER NAME` and `stash get CONTAINER NAME`. get is the only
 * command that prints a secret; it writes the value's exact bytes (plus a
 * newline only when stdout is a terminal) and wipes them once written.
 */
import { UsageError } from '../../errors.js';
import { readEntryOf, updateEntriesOf } from '../container-access.js';
import { MAX_VALUE_BYTES, validateContainerName, validateEntryName } from '../../vault/names.js';
import { wipe } from '../../vault/secure.js';
import { writeStdout } from '../../output-streams.js';
import { loadBinding } from '../../native/binding.js';
import { note } from '../output.js';
import type { Invocation } from '../registry.js';
import { Session } from '../session.js';

export async function run(inv: Invocation): Promise<number> {
  const [container, name] = inv.positionals as [string, string];
  validateContainerName(container);
  validateEntryName(name);
  const session = new Session(inv.values);
  try {
    return inv.command.path[0] === 'get' ? await get(session, container, name) : await set(session, container, name, inv.values['allow-empty'] === true);
  } finally {
    session.close();
  }
}

async function get(session: Session, container: string, name: string): Promise<number> {
  const value = await session.withContentKey(container, (key, info) => readEntryOf(session.dir, info, key, name));
  try {
    await writeStdout(value);
    if (stdoutIsTerminal()) await writeStdout('\n');
  } finally {
    wipe(value);
  }
  return 0;
}

/**
 * isatty(1) through the addon (loaded already when the agent answered):
 * process.stdout.isTTY would make the stream, and load node:tty and node:net.
 */
function stdoutIsTerminal(): boolean {
  try {
    const isTerminal = loadBinding().isTerminal;
    if (isTerminal) return isTerminal(1);
  } catch {
    /* no addon: ask the stream */
  }
  return process.stdout.isTTY === true;
}

/**
 * The value: stdin when it is not a terminal (one trailing newline dropped),
 * else a hidden prompt. Both readers load here, off the `get` path.
 */
async function readValue(session: Session, name: string): Promise<Buffer> {
  if (!process.stdin.isTTY) {
    if (session.source.stdin) {
      throw new UsageError('--password-stdin cannot be used while the value comes from standard input; use --password-file FILE');
    }
    const { readFdSecure } = await import('../secure-read.js');
    return readFdSecure(0, { maxBytes: MAX_VALUE_BYTES, what: `the value of ${name} on standard input`, stripNewline: true });
  }
  const { promptHidden } = await import('../prompt.js');
  return promptHidden(`Value of ${name} (hidden): `, MAX_VALUE_BYTES);
}

/**
 * An empty value is nearly always a slip (Enter at the prompt, a pipe whose
 * producer failed) that would silently replace a secret with "".
 */
function refuseEmpty(value: Buffer, name: string, allowEmpty: boolean): Buffer {
  if (value.length > 0 || allowEmpty) return value;
  wipe(value);
  throw new UsageError(`the value of ${name} is empty; nothing was stored (add --allow-empty to store an empty value)`);
}

async function set(session: Session, container: string, name: string, allowEmpty: boolean): Promise<number> {
  // A value piped in is read first, so that a password prompt cannot consume it
  // and an empty one is refused before any password is asked.
  let value = process.stdin.isTTY ? null : refuseEmpty(await readValue(session, name), name, allowEmpty);
  try {
    await session.withContentKey(container, async (key, info) => {
      value ??= refuseEmpty(await readValue(session, name), name, allowEmpty);
      await updateEntriesOf(session, info, key, new Map([[name, value]]));
    });
  } finally {
    wipe(value);
  }
  note(`Stored ${name} in ${container}.`);
  return 0;
}
