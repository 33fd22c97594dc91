/**
 * `stash vault contact accept-rotation FILE [--json]` (FILE `-`: standard
 * input): takes a contact's new key from a rotation statement signed by the
 * key you checked by fingerprint (docs/vault.md, "Identity rotation"). Shared
 * containers they own are pinned to the new key; those you own are re-sealed
 * to it. A statement from a key that is not a contact's, or a second,
 * different one from a key that already rotated, changes nothing.
 */
import { readSync } from 'node:fs';
import { StashError } from '../../errors.js';
import { fingerprintOf, formatFingerprint, wipe } from '../../vault/index.js';
import { readBounded } from '../../vault/fs-atomic.js';
import { VaultError } from '../../vault/errors.js';
import { out, outJson, terminalSafe } from '../output.js';
import type { Invocation } from '../command-types.js';
import { Session } from '../session.js';

/** A statement is one line of about 400 characters; anything much larger is not one. */
const MAX_INPUT = 4096;

const tooLong = (size: number) =>
  new VaultError('BAD_ROTATION', `not a valid rotation statement: ${size} bytes is far longer than a statement`);

/** Standard input up to one byte past MAX_INPUT: enough to refuse more without reading it all. */
function readStdin(): Buffer {
  const buf = Buffer.alloc(MAX_INPUT + 1);
  let off = 0;
  for (let n = 1; n > 0 && off < buf.length; off += n) n = readSync(0, buf, off, buf.length - off, null);
  if (off > MAX_INPUT) throw tooLong(off);
  return buf.subarray(0, off);
}

/**
 * FILE, or standard input for `-`, read with a bound: a FIFO, a device or a
 * huge file is refused without waiting on it or holding it in memory.
 */
function readInput(file: string): string {
  let bytes: Buffer | null;
  try {
    bytes =
      file === '-'
        ? readStdin()
        : readBounded(file, MAX_INPUT, (size) =>
            size < 0
              ? new VaultError('BAD_ROTATION', `${file} is not a regular file, so not a rotation statement`)
              : tooLong(size),
          );
  } catch (err) {
    if (err instanceof StashError) throw err;
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'EACCES' || code === 'EPERM')
      throw new StashError('PERMISSION', `cannot read ${file}: permission denied`);
    throw new StashError('VAULT_IO', `cannot read ${file}: ${code ?? 'error'}`);
  }
  if (bytes === null) throw new StashError('FILE_NOT_FOUND', `no such file: ${file}`);
  return bytes.toString('latin1');
}

export async function run(inv: Invocation): Promise<number> {
  const { acceptRotation, parseStatement } = await import('../../vault/rotation/index.js');
  // Checked before any password is asked: a damaged or forged statement costs no prompt.
  const s = parseStatement(readInput(inv.positionals[0]!));
  const session = new Session(inv.values);
  try {
    const vaultKey = await session.vaultKey();
    try {
      const r = acceptRotation(session.dir, vaultKey, s);
      const { containerInfo } = await import('../../vault/index.js');
      for (const c of r.resealed)
        await session.forget(Buffer.from(containerInfo(session.dir, c.name).id, 'hex')).catch(() => {});
      const oldFp = formatFingerprint(fingerprintOf(r.old.x25519, r.old.ed25519));
      if (inv.values.json === true) {
        outJson({
          contact: { name: r.contact.name, email: r.contact.email, fingerprint: r.contact.fingerprint },
          oldFingerprint: oldFp,
          already: r.already,
          repinned: r.repinned,
          resealed: r.resealed,
          failed: r.failed,
        });
        return r.failed.length === 0 ? 0 : 1;
      }
      const who = `${terminalSafe(r.contact.name)} <${terminalSafe(r.contact.email)}>`;
      out(
        r.already
          ? `Already accepted: ${who} rotated from ${oldFp} to ${r.contact.fingerprint}.`
          : `${who} rotated to a new key, signed by the key you checked:`,
      );
      if (!r.already) {
        out(`  old fingerprint: ${oldFp}`);
        out(`  new fingerprint: ${r.contact.fingerprint}`);
      }
      if (r.repinned.length > 0) out(`Containers they own, now trusted under the new key: ${r.repinned.join(', ')}`);
      if (r.resealed.length > 0)
        out(
          `Containers you own, re-sealed to their new key: ${r.resealed.map((c) => `${c.name} (version ${c.revision})`).join(', ')}`,
        );
      for (const f of r.failed)
        out(`Not re-sealed: ${f.name}: ${terminalSafe(f.error)} (run this command again once that is fixed)`);
      return r.failed.length === 0 ? 0 : 1;
    } finally {
      wipe(vaultKey);
    }
  } finally {
    session.close();
  }
}
