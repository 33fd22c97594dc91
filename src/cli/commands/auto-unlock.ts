/**
 * `stash vault sessions auto-unlock status | enable | disable | forget`.
 * enable checks the password against the vault before storing it, so a typo
 * is never saved; disable keeps the stored secret but stops using it; forget
 * deletes it.
 */
import { errorMessage } from '../../errors.js';
import { readVaultInfo, unlockVault, wipe } from '../../vault/index.js';
import {
  autoUnlockEnabled,
  backendName,
  keyringDelete,
  keyringGet,
  keyringSet,
  setAutoUnlockEnabled,
  statePath,
} from '../keyring.js';
import { out, outJson } from '../output.js';
import { promptPassword, readExplicitPassword } from '../password.js';
import type { Invocation } from '../command-types.js';
import { Session } from '../session.js';

export async function run(inv: Invocation): Promise<number> {
  const action = inv.command.path[3];
  const session = new Session(inv.values);
  try {
    const vaultId = readVaultInfo(session.dir).vaultId;
    switch (action) {
      case 'enable':
        return await enable(session, vaultId);
      case 'disable':
        setAutoUnlockEnabled(vaultId, session.dir, false);
        out(
          'Auto-unlock disabled. The stored password stays in the keyring; `stash vault sessions auto-unlock forget` deletes it.',
        );
        return 0;
      case 'forget': {
        setAutoUnlockEnabled(vaultId, session.dir, false);
        const deleted = keyringDelete(vaultId);
        out(
          deleted
            ? `Deleted the stored password from the ${backendName()}; auto-unlock disabled.`
            : 'No password was stored; auto-unlock disabled.',
        );
        return 0;
      }
      default:
        return status(session.dir, vaultId, inv.values.json === true);
    }
  } finally {
    session.close();
  }
}

async function enable(session: Session, vaultId: string): Promise<number> {
  const password =
    readExplicitPassword(session.source) ?? (await promptPassword(`Password for the vault at ${session.dir}: `));
  try {
    // Proves the password before it is stored; the key is cached as a bonus.
    const key = await session.withActivity('unlock', process.pid, () => unlockVault(session.dir, password));
    try {
      await session.cache(Buffer.from(vaultId, 'hex'), key, session.dir);
    } finally {
      wipe(key);
    }
    keyringSet(vaultId, password);
  } finally {
    wipe(password);
  }
  setAutoUnlockEnabled(vaultId, session.dir, true);
  out(`Auto-unlock enabled: the vault password is stored in the ${backendName()}.`);
  out('Anyone who can use your unlocked login session can now open this vault without the password.');
  return 0;
}

function status(dir: string, vaultId: string, json: boolean): number {
  const enabled = autoUnlockEnabled(vaultId);
  let stored: boolean | null = null;
  let problem: string | null = null;
  try {
    const secret = keyringGet(vaultId);
    stored = secret !== null;
    wipe(secret);
  } catch (err) {
    problem = errorMessage(err);
  }
  const backend = backendName();
  if (json) {
    outJson({
      vaultDir: dir,
      vaultId,
      enabled,
      backend,
      available: problem === null,
      secretStored: stored,
      problem,
      stateFile: statePath(),
    });
    return 0;
  }
  out(`Auto-unlock:   ${enabled ? 'enabled' : 'disabled'}`);
  out(`Backend:       ${backend}${problem === null ? '' : ' (unavailable)'}`);
  out(`Secret stored: ${stored === null ? `unknown: ${problem}` : stored ? 'yes' : 'no'}`);
  if (enabled && stored === false)
    out('The keyring holds no password: run `stash vault sessions auto-unlock enable` again.');
  return 0;
}
