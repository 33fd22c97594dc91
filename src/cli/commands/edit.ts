/**
 * `stash edit CONTAINER PATH [--field NAME]`: the value (or a field) in $VISUAL (else $EDITOR, else vi)
 * through a private file on tmpfs (edit-file.ts), stored again only if the
 * editor changed it, byte for byte: no newline is added or removed.
 *
 * While the editor runs, Ctrl-C belongs to it (the terminal sends SIGINT to
 * both; stash ignores it, as git does); SIGTERM and SIGHUP are passed on to
 * the editor. However the editor ends, the file is overwritten and removed
 * before stash exits, and an exit hook does the same if anything throws.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { constants } from 'node:os';
import { StashError, UsageError } from '../../errors.js';
import { fieldKey, validateFieldName } from '../../vault/entry-path.js';
import { constantTimeEqual, wipe } from '../../vault/secure.js';
import { readEntryOf, updateEntriesOf } from '../container-access.js';
import { EditFile } from '../edit-file.js';
import { note } from '../output.js';
import type { Invocation } from '../command-types.js';
import { entryTarget } from '../entry-target.js';
import { Session } from '../session.js';

const PASSED_ON = ['SIGTERM', 'SIGHUP'] as const;

function editorCommand(): string {
  return process.env.VISUAL || process.env.EDITOR || (process.platform === 'win32' ? 'notepad' : 'vi');
}

/**
 * Starts the editor on `path`. Like git, the variable may hold arguments
 * (`code --wait`): a shell reads it, the path passed as $1. The shell execs
 * the editor, so the child stash signals and waits for is the editor itself
 * (a shell left in between would catch a Ctrl-C and outlive a SIGTERM).
 */
function startEditor(editor: string, path: string): ChildProcess {
  if (process.platform === 'win32') return spawn(`${editor} "${path}"`, { stdio: 'inherit', shell: true });
  return spawn('/bin/sh', ['-c', `exec ${editor} "$1"`, 'sh', path], { stdio: 'inherit' });
}

/**
 * Runs the editor with Ctrl-C left to it and SIGTERM/SIGHUP passed on.
 * Resolves with how it ended and the last signal stash itself received.
 */
async function runEditor(
  editor: string,
  path: string,
): Promise<{ code: number | null; signal: NodeJS.Signals | null; received: NodeJS.Signals | null }> {
  let received: NodeJS.Signals | null = null;
  let child: ChildProcess | null = null;
  const onInt = (): void => {
    received = 'SIGINT';
  };
  const passOn = (sig: NodeJS.Signals): void => {
    received = sig;
    child?.kill(sig);
  };
  process.on('SIGINT', onInt);
  for (const sig of PASSED_ON) process.on(sig, passOn);
  try {
    child = startEditor(editor, path);
    const [code, signal] = await Promise.race([
      once(child, 'exit') as Promise<[number | null, NodeJS.Signals | null]>,
      once(child, 'error').then(([err]) => {
        throw new StashError('COMMAND_FAILED', `cannot run the editor ${editor}: ${(err as Error).message}`);
      }),
    ]);
    return { code, signal, received };
  } finally {
    process.removeListener('SIGINT', onInt);
    for (const sig of PASSED_ON) process.removeListener(sig, passOn);
  }
}

export async function run(inv: Invocation): Promise<number> {
  const { container, path } = await entryTarget(inv);
  const field = inv.values.field;
  if (field !== undefined) validateFieldName(field);
  // What messages call it, and the key it is stored under (a field beside the value: PATH#FIELD).
  const name = field === undefined ? path : `${path}#${field}`;
  const key = field === undefined ? path : fieldKey(path, field);
  const editor = editorCommand();
  const session = new Session(inv.values);
  let original: Buffer | null = null;
  let edited: Buffer | null = null;
  let file: EditFile | null = null;
  const removeFile = (): void => file?.remove();
  process.on('exit', removeFile);
  try {
    // Named by the last segment (a path's folders are not made on the tmpfs), so an editor still sees github.com.
    const base = path.slice(path.lastIndexOf('/') + 1);
    file = EditFile.prepare(field === undefined ? base : `${base}.${field}`, inv.values['insecure-tmp'] === true);
    original = await session.withContentKey(container, (ck, info) => readEntryOf(session.dir, info, ck, key));
    file.write(original);
    const ended = await runEditor(editor, file.path);
    const signalled = ended.signal ?? (ended.received === 'SIGINT' && ended.code !== 0 ? 'SIGINT' : null);
    if (signalled !== null) {
      note(`The editor was ended by ${signalled}; ${name} was not changed.`);
      return 128 + (constants.signals[signalled] ?? 0);
    }
    if (ended.received !== null && ended.received !== 'SIGINT') return 128 + (constants.signals[ended.received] ?? 0);
    if (ended.code === 127)
      throw new StashError(
        'COMMAND_NOT_FOUND',
        `${editor}: the editor was not found (set VISUAL or EDITOR); ${name} was not changed`,
      );
    if (ended.code !== 0)
      throw new StashError('EDITOR_FAILED', `the editor exited with status ${ended.code}; ${name} was not changed`);
    edited = file.read();
    file.remove();
    if (constantTimeEqual(edited, original)) {
      note(`${name} is unchanged; nothing was stored.`);
      return 0;
    }
    if (edited.length === 0)
      throw new UsageError(
        `the edited value of ${name} is empty; nothing was stored (stash rm removes an entry; stash set --allow-empty stores an empty value)`,
      );
    const value = edited;
    await session.withContentKey(container, (ck, info) => updateEntriesOf(session, info, ck, new Map([[key, value]])));
    note(`Stored the edited ${name} in ${container}.`);
    return 0;
  } finally {
    removeFile();
    process.removeListener('exit', removeFile);
    wipe(original);
    wipe(edited);
    session.close();
  }
}
