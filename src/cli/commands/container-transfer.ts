/**
 * `stash container export NAME FILE | import FILE [--name NAME] |
 * link PATH [--name NAME]`: container files between vaults and places.
 * export needs no key (the file is already encrypted, and is verified, not
 * opened); import and link need the vault key, to open files with this
 * vault's identity. (merge: container-merge.ts.)
 */
import { existsSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { StashError, UsageError } from '../../errors.js';
import { defaultVaultDir, validateContainerName, wipe } from '../../vault/index.js';
import { containerInfo } from '../../vault/containers.js';
import { exportPrivate, importPrivate, isPrivateContainerFile } from '../../vault/private-transfer.js';
import { exportShared, importShared, linkShared, type TransferResult } from '../../vault/sharing/index.js';
import { out } from '../output.js';
import type { Invocation } from '../command-types.js';
import { Session } from '../session.js';

export async function run(inv: Invocation): Promise<number> {
  const action = inv.command.path[1];
  if (action === 'export') return exportFile(inv.positionals[0]!, inv.positionals[1]!);
  const file = inv.positionals[0]!;
  const name = typeof inv.values.name === 'string' ? inv.values.name : undefined;
  if (name !== undefined) validateContainerName(name);
  if (file.length === 0) throw new UsageError(`${action === 'link' ? 'PATH' : 'FILE'} must not be empty`);
  const session = new Session(inv.values);
  try {
    const vaultKey = await session.vaultKey();
    try {
      if (action === 'import' && isPrivateContainerFile(file)) {
        if (name !== undefined)
          throw new UsageError(
            'a private container is imported under the name it was exported with (it is bound into its encryption): leave out --name',
          );
        const p = importPrivate(session.dir, vaultKey, file);
        out(
          p.outcome === 'unchanged'
            ? `${p.name} already holds what ${file} holds; nothing changed.`
            : `${p.outcome === 'updated' ? 'Updated' : 'Imported'} private container ${p.name} from ${file}.`,
        );
        return 0;
      }
      const r =
        action === 'import'
          ? importShared(session.dir, vaultKey, file, name)
          : linkShared(session.dir, vaultKey, file, name);
      report(action === 'import' ? 'import' : 'link', r, file);
      return 0;
    } finally {
      wipe(vaultKey);
    }
  } finally {
    session.close();
  }
}

function exportFile(name: string, file: string): number {
  validateContainerName(name);
  if (file.length === 0) throw new UsageError('FILE must not be empty');
  // Said before anything is written, in the user's words: the write itself would name a temporary file.
  const folder = dirname(resolve(file));
  if (!existsSync(folder))
    throw new StashError(
      'FILE_NOT_FOUND',
      `cannot export ${name} to ${file}: the folder ${folder} does not exist (create it first); nothing was written`,
    );
  const dir = defaultVaultDir();
  if (!containerInfo(dir, name).shared) {
    // A copy of the file, readable by this vault alone (vault/private-transfer.ts).
    const p = exportPrivate(dir, name, file);
    out(
      p.outcome === 'unchanged'
        ? `${p.path} already holds ${name}; nothing written.`
        : `Wrote private container ${name} to ${p.path} (mode 0600). Only this vault can open it: stash container import ${file}`,
    );
    return 0;
  }
  const r = exportShared(dir, name, file);
  if (r.outcome === 'unchanged') out(`${r.path} already holds version ${r.revision} of ${name}; nothing written.`);
  else if (r.outcome === 'updated')
    out(`Updated ${r.path} from version ${r.previous!.revision} to version ${r.revision} of ${name}.`);
  else out(`Wrote version ${r.revision} of ${name} to ${r.path}.`);
  return 0;
}

/** What import or link did; `source` is the file the user named (import copies it into the vault). */
function report(action: 'import' | 'link', r: TransferResult, source: string): void {
  switch (r.outcome) {
    case 'unchanged':
      out(
        `${r.name} is already at version ${r.revision}${action === 'link' ? `, linked to ${r.path}` : ''}; nothing changed.`,
      );
      return;
    case 'updated':
      out(
        action === 'link'
          ? `${r.name} now uses ${r.path} (version ${r.revision}).`
          : `Updated ${r.name} from version ${r.previous!.revision} to version ${r.revision} (from ${source}).`,
      );
      return;
    case 'replaced-copy':
      out(
        `${r.name} now uses ${r.path} (version ${r.revision}); the copy in the vault, version ${r.previous!.revision}, was removed.`,
      );
      break;
    default:
      out(
        action === 'link'
          ? `Linked ${r.name} to ${r.path} (version ${r.revision}).`
          : `Imported ${source} as ${r.name} (version ${r.revision}).`,
      );
  }
  if (action === 'link')
    out(`get, set and env now read and write that file; see who may open it with: stash container members ${r.name}`);
}
