/**
 * `stash inject [-i TEMPLATE] [-o FILE]`: copies a template (stdin by
 * default) to stdout or FILE with every `{{ stash://CONTAINER/NAME }}`
 * replaced by its value. Every reference is resolved before anything is
 * written, so a missing one writes nothing; FILE is written 0600, atomically,
 * and only if it is a regular file or a new one (vault/user-file.ts). The
 * filled text is assembled in secure memory (refs/template.ts).
 */
import { readFileSync } from 'node:fs';
import { UsageError } from '../../errors.js';
import { writeStdout } from '../../output-streams.js';
import { wipe } from '../../vault/secure.js';
import { checkOutputPath, writeUserFile } from '../../vault/user-file.js';
import { note } from '../output.js';
import { resolveRefs, resolvedValue, wipeResolved } from '../refs/resolve.js';
import { fillTemplate, scanTemplate } from '../refs/template.js';
import type { Invocation } from '../command-types.js';
import { Session } from '../session.js';
import { isTerminal } from '../terminal.js';

/** A template is text meant for people to edit: 16 MiB is far past any real one. */
const MAX_TEMPLATE_BYTES = 16 * 1024 * 1024;

function readTemplate(path: string | null): Buffer {
  let bytes: Buffer;
  try {
    bytes = readFileSync(path ?? 0);
  } catch (err) {
    throw new UsageError(`cannot read the template ${path ?? 'from standard input'}: ${(err as Error).message}`);
  }
  if (bytes.length > MAX_TEMPLATE_BYTES)
    throw new UsageError(`the template is larger than ${MAX_TEMPLATE_BYTES} bytes`);
  return bytes;
}

export async function run(inv: Invocation): Promise<number> {
  const input = typeof inv.values.in === 'string' ? inv.values.in : null;
  const output = typeof inv.values.out === 'string' ? inv.values.out : null;
  if (input === null && isTerminal(0)) throw new UsageError('give the template with -i TEMPLATE or on standard input');
  // A device, FIFO, socket, folder or link at FILE is refused before anything is decrypted.
  if (output !== null) checkOutputPath(output);
  const bytes = readTemplate(input);
  const template = bytes.toString('utf8');
  const scan = scanTemplate(template);
  const session = new Session(inv.values);
  try {
    const values = await resolveRefs(session, scan.refs);
    let filled: Buffer | null = null;
    try {
      filled = fillTemplate(
        bytes,
        template,
        scan,
        scan.refs.map((r) => resolvedValue(values, r)),
      );
      const { count } = scan;
      if (output !== null) {
        writeUserFile(output, [filled]); // 0600: the file holds secrets
        note(`Wrote ${output} (${count} reference${count === 1 ? '' : 's'} filled, mode 0600).`);
      } else {
        await writeStdout(filled);
      }
    } finally {
      wipe(filled);
      wipeResolved(values);
    }
    return 0;
  } finally {
    session.close();
  }
}
