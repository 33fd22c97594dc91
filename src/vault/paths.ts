/**
 * Where a vault lives and what is inside it.
 *
 *   <vault>/vault.json              format version, vault id, KDF parameters, wrapped vault key
 *   <vault>/identity.json           public keys; secret keys wrapped by the vault key
 *   <vault>/contacts.stash          contacts, encrypted and authenticated with the vault key
 *   <vault>/containers/<name>.stash one file per container
 *   <vault>/vault.lock              present only while a write is in progress
 */
import { existsSync } from 'node:fs';
import { homedir } from 'node:os';
import { join, posix, win32 } from 'node:path';

export const VAULT_FILE = 'vault.json';
export const IDENTITY_FILE = 'identity.json';
export const CONTACTS_FILE = 'contacts.stash';
export const CONTAINERS_DIR = 'containers';
export const CONTAINER_EXT = '.stash';

/**
 * The vault folder for this user: STASH_VAULT_DIR when set, else the platform's
 * per-user data folder: Linux and other Unix `$XDG_DATA_HOME/stash` (only an
 * absolute XDG_DATA_HOME counts, as the XDG spec says) else `~/.local/share/stash`;
 * macOS `~/Library/Application Support/stash/vault`; Windows `%APPDATA%\stash\vault`.
 */
export function defaultVaultDir(
  env: NodeJS.ProcessEnv = process.env,
  platform: NodeJS.Platform = process.platform,
): string {
  if (env.STASH_VAULT_DIR) return env.STASH_VAULT_DIR;
  if (platform === 'win32') {
    const appData = env.APPDATA || win32.join(env.USERPROFILE || homedir(), 'AppData', 'Roaming');
    return win32.join(appData, 'stash', 'vault');
  }
  const home = env.HOME || homedir();
  if (platform === 'darwin') return posix.join(home, 'Library', 'Application Support', 'stash', 'vault');
  const xdg = env.XDG_DATA_HOME;
  if (xdg && posix.isAbsolute(xdg)) return posix.join(xdg, 'stash');
  return posix.join(home, '.local', 'share', 'stash');
}

/** The paths of the files of the vault at `dir`. */
export function vaultPaths(dir: string) {
  return {
    dir,
    meta: join(dir, VAULT_FILE),
    identity: join(dir, IDENTITY_FILE),
    contacts: join(dir, CONTACTS_FILE),
    containers: join(dir, CONTAINERS_DIR),
    container: (name: string) => join(dir, CONTAINERS_DIR, `${name}${CONTAINER_EXT}`),
  };
}

/** True when `dir` holds a vault (its vault.json exists). Does not check the vault's health. */
export function vaultExists(dir: string): boolean {
  return existsSync(vaultPaths(dir).meta);
}
