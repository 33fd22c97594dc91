/**
 * Entries of any container for the commands: private ones (format version 1)
 * through src/vault/containers.ts, shared ones through src/vault/sharing/,
 * which is imported only when a shared container is used, so that `stash get`
 * on a private container loads none of it.
 *
 * A write to a shared container is a revision signed with the identity's
 * Ed25519 key, so it needs the vault key (from the agent, else the password)
 * besides the content key.
 */
import { wipeEntries } from '../vault/container-body.js';
import { entryNotFound, readEntries, updateEntries, type ContainerInfo, type Entries } from '../vault/containers.js';
import type { HistoryPolicy } from '../vault/entry-history.js';
import type { ContainerRef } from '../vault/names.js';
import { secureCopy, wipe } from '../vault/secure.js';
import type { Session } from './session.js';

const sharing = () => import('../vault/sharing/index.js');

/** Every entry (release with wipeEntries()). `info` carries the checked name: nothing checks it again. */
export async function readEntriesOf(dir: string, info: ContainerInfo, key: Buffer): Promise<Entries> {
  if (!info.shared) return readEntries(dir, info, key);
  return (await sharing()).readSharedEntries(dir, info, key);
}

/**
 * One stored value (an entry's, or PATH#FIELD) as a secure copy (release with
 * wipe()); ENTRY_NOT_FOUND when absent. The name was checked where it came in
 * (entry-target.ts), so it is only looked up here.
 */
export async function readEntryOf(dir: string, info: ContainerInfo, key: Buffer, entryName: string): Promise<Buffer> {
  const entries = await readEntriesOf(dir, info, key);
  try {
    const value = entries.get(entryName);
    if (value === undefined) throw entryNotFound(info.name, entryName, entries.keys());
    return secureCopy(value);
  } finally {
    wipeEntries(entries);
  }
}

/**
 * The history policy of a write: vault.history_keep (or STASH_HISTORY_KEEP)
 * previous values per entry, and the entries whose history goes (`rm --purge`).
 */
export async function historyPolicy(extra: Omit<HistoryPolicy, 'keep'> = {}): Promise<HistoryPolicy> {
  const { loadConfig } = await import('../config/app-config.js');
  return { keep: (await loadConfig()).historyKeep.value, ...extra };
}

/**
 * Applies changes (a Buffer sets, null deletes) in one write, the values they
 * replace kept in the entries' history; `extra` names entries whose history
 * goes too (purge) or moves to another name (moves). Returns the names that changed.
 */
export async function updateEntriesOf(
  session: Session,
  info: ContainerInfo,
  key: Buffer,
  changes: ReadonlyMap<string, Buffer | null>,
  extra: Omit<HistoryPolicy, 'keep'> = {},
): Promise<string[]> {
  const policy = await historyPolicy(extra);
  if (!info.shared) return updateEntries(session.dir, info, key, changes, policy);
  const { identitySecret } = await import('../vault/identity.js');
  const vaultKey = await session.vaultKey();
  let secret;
  try {
    secret = identitySecret(session.dir, vaultKey);
  } finally {
    wipe(vaultKey);
  }
  try {
    return (await sharing()).updateSharedEntries(session.dir, info, key, changes, secret, policy);
  } finally {
    wipe(secret.x25519);
    wipe(secret.ed25519);
  }
}

/** The content key of a shared container, from this vault's sealed stanza (release with wipe()). */
export async function openSharedKey(dir: string, vaultKey: Buffer, name: ContainerRef): Promise<Buffer> {
  const [{ identitySecret }, { openSharedContentKey }] = await Promise.all([import('../vault/identity.js'), sharing()]);
  const secret = identitySecret(dir, vaultKey);
  try {
    return openSharedContentKey(dir, name, secret);
  } finally {
    wipe(secret.x25519);
    wipe(secret.ed25519);
  }
}
