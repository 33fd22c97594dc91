/**
 * Auto-unlock: the vault password kept in the OS keyring (Secret Service on
 * Linux, Keychain on macOS, Credential Manager on Windows) through
 * @napi-rs/keyring, under service "stash" and the vault id as account.
 *
 * Whether auto-unlock is enabled is remembered apart from the secret, in a
 * small per-machine state file (no secret in it), so that `disable` can stop
 * using a stored password without deleting it and `status` can say both. The
 * keyring module is native and is only loaded when it is needed.
 */
import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';
import { StashError, errorMessage } from '../errors.js';
import { secureAlloc } from '../vault/secure.js';

export const KEYRING_SERVICE = 'stash';

export class KeyringError extends StashError {}

/** The keyring this platform uses, in words. */
export function backendName(platform: NodeJS.Platform = process.platform): string {
  if (platform === 'darwin') return 'macOS Keychain';
  if (platform === 'win32') return 'Windows Credential Manager';
  return 'Secret Service (org.freedesktop.secrets on the session bus)';
}

/** The per-machine state file: $XDG_STATE_HOME/stash/auto-unlock.json and equivalents. */
export function statePath(env: NodeJS.ProcessEnv = process.env, platform: NodeJS.Platform = process.platform): string {
  const home = env.HOME || homedir();
  if (platform === 'darwin') return join(home, 'Library', 'Application Support', 'stash', 'auto-unlock.json');
  if (platform === 'win32')
    return join(env.LOCALAPPDATA || join(home, 'AppData', 'Local'), 'stash', 'auto-unlock.json');
  const state = env.XDG_STATE_HOME?.startsWith('/') ? env.XDG_STATE_HOME : join(home, '.local', 'state');
  return join(state, 'stash', 'auto-unlock.json');
}

interface StateFile {
  vaults: Record<string, { enabled: boolean; vaultDir: string; changedAt: string }>;
}

function readState(): StateFile {
  const path = statePath();
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch {
    return { vaults: {} };
  }
  try {
    const doc = JSON.parse(text) as StateFile;
    if (typeof doc === 'object' && doc !== null && typeof doc.vaults === 'object' && doc.vaults !== null) return doc;
  } catch {
    /* fall through */
  }
  throw new StashError(
    'CONFIG',
    `${path} is damaged (not the auto-unlock state stash writes); delete it and enable auto-unlock again`,
  );
}

/** Whether auto-unlock is enabled for the vault `vaultId` (hex). */
export function autoUnlockEnabled(vaultId: string): boolean {
  return readState().vaults[vaultId]?.enabled === true;
}

/** Records the enabled flag for a vault (atomically, mode 0600). */
export function setAutoUnlockEnabled(vaultId: string, vaultDir: string, enabled: boolean): void {
  const state = readState();
  state.vaults[vaultId] = { enabled, vaultDir, changedAt: new Date().toISOString() };
  const path = statePath();
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  const tmp = `${path}.${process.pid}.tmp`;
  writeFileSync(tmp, `${JSON.stringify(state, null, 2)}\n`, { mode: 0o600 });
  renameSync(tmp, path);
}

interface KeyringEntry {
  setSecret(secret: Uint8Array): void;
  getSecret(): number[] | null;
  deleteCredential(): boolean;
}

function entry(vaultId: string): KeyringEntry {
  let mod: { Entry: new (service: string, user: string, opts?: object) => KeyringEntry };
  try {
    mod = createRequire(import.meta.url)('@napi-rs/keyring') as typeof mod;
  } catch (err) {
    throw new KeyringError('KEYRING_UNAVAILABLE', `the keyring library cannot be loaded: ${errorMessage(err)}`);
  }
  // Pinned to the Secret Service on Linux: the library would otherwise fall
  // back silently to the kernel keyring, which forgets everything at logout.
  return new mod.Entry(KEYRING_SERVICE, vaultId, { linux: { store: 'secret-service' } });
}

/**
 * What went wrong, as a sentence: the keyring library passes on D-Bus and
 * X11 text ("Platform failure: DBus error: Using X11 for dbus-daemon
 * autolaunch was disabled at compile time, ..."), which tells a user nothing
 * they can act on. Unknown failures keep the library's words, marked as such.
 */
export function keyringProblem(raw: string): string {
  if (/X11|autolaunch|DBUS_SESSION_BUS_ADDRESS/i.test(raw)) {
    return 'there is no session bus (DBUS_SESSION_BUS_ADDRESS is not set); auto-unlock works inside a desktop login session';
  }
  const socket = /Failed to connect to socket ([^:]+): (.*)$/i.exec(raw);
  if (socket) {
    const [, path, why] = socket as unknown as [string, string, string];
    if (/No such file/i.test(why)) return `the session bus ${path} does not exist (check DBUS_SESSION_BUS_ADDRESS)`;
    if (/refused/i.test(why)) return `nothing answers on the session bus ${path} (check DBUS_SESSION_BUS_ADDRESS)`;
    return `the session bus ${path} cannot be reached (check DBUS_SESSION_BUS_ADDRESS)`;
  }
  if (/ServiceUnknown|not provided by any \.service|no secret service provider/i.test(raw)) {
    return 'no Secret Service runs on the session bus; start a keyring such as GNOME Keyring, KWallet or KeePassXC with its Secret Service integration';
  }
  if (/prompt dismissed/i.test(raw)) return 'the keyring is locked and its unlock prompt was dismissed';
  if (/locked/i.test(raw)) return 'the keyring is locked; unlock it (log in to the desktop session) and try again';
  if (/Couldn't access platform secure storage|NoStorageAccess/i.test(raw))
    return 'the keyring refused access to its storage';
  return `the keyring library failed (${raw.replace(/^Platform failure: /, '').slice(0, 200)})`;
}

function keyringFailure(action: string, err: unknown): KeyringError {
  return new KeyringError(
    'KEYRING_UNAVAILABLE',
    `cannot ${action} the ${backendName()}: ${keyringProblem(errorMessage(err))}`,
  );
}

/** The stored password in secure memory, or null when none is stored. */
export function keyringGet(vaultId: string): Buffer | null {
  let bytes: number[] | null;
  try {
    bytes = entry(vaultId).getSecret();
  } catch (err) {
    throw keyringFailure('read from', err);
  }
  if (bytes === null) return null;
  const out = secureAlloc(bytes.length);
  for (let i = 0; i < bytes.length; i++) out[i] = bytes[i]!;
  bytes.fill(0); // the library hands the secret over as a plain array; clear our copy
  return out;
}

/** Stores (or replaces) the password. */
export function keyringSet(vaultId: string, password: Buffer): void {
  try {
    entry(vaultId).setSecret(password);
  } catch (err) {
    throw keyringFailure('write to', err);
  }
}

/** Deletes the stored password; false when there was none. */
export function keyringDelete(vaultId: string): boolean {
  try {
    return entry(vaultId).deleteCredential();
  } catch (err) {
    throw keyringFailure('delete from', err);
  }
}
