/**
 * `stash inject [-i TEMPLATE] [-o FILE]`: copies a template (stdin by
 * default) to stdout or FILE with every `{{ stash://CONTAINER/NAME }}`
 * replaced by its value. Every reference is resolved before anything is
 * written, so a missing one writes nothing; FILE is written 0600, atomically.
 * The filled text is assembled in secure memory.
 */
import { readFileSync } from 'node:fs';
import { UsageError } from '../../errors.js';
import { writeStdout } from '../../output-streams.js';
import { atomicWrite } from '../../vault/fs-atomic.js';
import { secureAlloc, wipe } from '../../vault/secure.js';
import { note } from '../output.js';
import { templateRefs } from '../refs/reference.js';
import { resolveRefs, wipeResolved } from '../refs/resolve.js';
import type { Invocation } from '../command-types.js';
import { Session } from '../session.js';
import { isTerminal } from '../terminal.js';

/** A template is text meant for people to edit: 16 MiB is far past any real one. */
const MAX_TEMPLATE_BYTES = 16 * 1024 * 1024;

function readTemplate(path: string | null): string {
  let bytes: Buffer;
  try {
    bytes = readFileSync(path ?? 0);
  } catch (err) {
    throw new UsageError(`cannot read the template ${path ?? 'from standard input'}: ${(err as Error).message}`);
  }
  if (bytes.length > MAX_TEMPLATE_BYTES)
    throw new UsageError(`the template is larger than ${MAX_TEMPLATE_BYTES} bytes`);
  return bytes.toString('utf8');
}

export async function run(inv: Invocation): Promise<number> {
  const input = typeof inv.values.in === 'string' ? inv.values.in : null;
  const output = typeof inv.values.out === 'string' ? inv.values.out : null;
  if (input === null && isTerminal(0)) throw new UsageError('give the template with -i TEMPLATE or on standard input');
  const template = readTemplate(input);
  const refs = templateRefs(template);
  const session = new Session(inv.values);
  try {
    const values = await resolveRefs(session, refs);
    let filled: Buffer | null = null;
    try {
      const pieces: Buffer[] = [];
      let at = 0;
      for (const r of refs) {
        pieces.push(Buffer.from(template.slice(at, r.start)), values.get(r.text)!);
        at = r.end;
      }
      pieces.push(Buffer.from(template.slice(at)));
      filled = secureAlloc(pieces.reduce((n, p) => n + p.length, 0));
      let off = 0;
      for (const p of pieces) off += p.copy(filled, off);
      if (output !== null) {
        atomicWrite(output, [filled]); // 0600: the file holds secrets
        note(`Wrote ${output} (${refs.length} reference${refs.length === 1 ? '' : 's'} filled, mode 0600).`);
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
