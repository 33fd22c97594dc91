/**
 * `stash container rename OLD NEW`. A private container's name is sealed
 * into its header, so it is rewritten under the new name with the vault key
 * (same id and content key: keys cached in the agent stay valid). A shared
 * container is only renamed in this vault: its file, id and members stay,
 * and no password is needed (src/vault/sharing/rename.ts).
 */
import { existsSync } from 'node:fs';
import { UsageError } from '../../errors.js';
import {
  containerInfo,
  defaultVaultDir,
  validateContainerName,
  vaultPaths,
  VaultError,
  wipe,
} from '../../vault/index.js';
import { recordPath } from '../../vault/sharing/records.js';
import { renameContainer } from '../../vault/containers.js';
import { out } from '../output.js';
import type { Invocation } from '../command-types.js';
import { Session } from '../session.js';

export async function run(inv: Invocation): Promise<number> {
  const [from, to] = inv.positionals as [string, string];
  validateContainerName(from);
  validateContainerName(to);
  if (from === to) throw new UsageError(`${from} is already called ${to}`);
  const dir = defaultVaultDir();
  const info = containerInfo(dir, from);
  // Refused before any password is asked.
  if (taken(dir, to))
    throw new VaultError(
      'CONTAINER_EXISTS',
      `a container named ${JSON.stringify(to)} already exists; nothing was renamed`,
    );
  if (info.shared) {
    const { renameShared } = await import('../../vault/sharing/rename.js');
    const r = renameShared(dir, from, to);
    out(
      `Renamed ${from} to ${to} in this vault; the shared file ${r.path} and its id are unchanged, so other members see no difference.`,
    );
    return 0;
  }
  const session = new Session(inv.values);
  try {
    const vaultKey = await session.vaultKey();
    try {
      const renamed = renameContainer(dir, vaultKey, from, to);
      out(`Renamed ${from} to ${to} (${renamed.path}).`);
    } finally {
      wipe(vaultKey);
    }
    return 0;
  } finally {
    session.close();
  }
}

/** True when `name` is in use (a damaged container, or a link whose file is gone, still holds its name). */
function taken(dir: string, name: string): boolean {
  return existsSync(vaultPaths(dir).container(name)) || existsSync(recordPath(dir, name));
}
