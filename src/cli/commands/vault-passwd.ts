/**
 * `stash vault passwd`: proves the current password (the agent's cached key is
 * not enough: someone at an unlocked terminal must not be able to change it),
 * then re-wraps the vault key under the new one. Containers, identity and
 * contacts stay as they are, and so do keys cached in the agent.
 */
import { errorMessage, UsageError } from '../../errors.js';
import { changePassword, readVaultInfo, wipe } from '../../vault/index.js';
import { autoUnlockEnabled, keyringSet } from '../keyring.js';
import { out, warn } from '../output.js';
import { isExplicit, readNewPassword } from '../password.js';
import { weakAllowed } from '../password-strength.js';
import type { Invocation } from '../command-types.js';
import { Session } from '../session.js';
import { kdfChoice } from './vault-init.js';

export async function run(inv: Invocation): Promise<number> {
  const session = new Session(inv.values);
  try {
    const kdf = kdfChoice(inv.values, null);
    const newFile = typeof inv.values['new-password-file'] === 'string' ? inv.values['new-password-file'] : null;
    if (isExplicit(session.source) && newFile === null) {
      throw new UsageError(
        'the current password comes from a file or stdin; give the new one with --new-password-file FILE',
      );
    }
    const vaultId = readVaultInfo(session.dir).vaultId;
    const vaultKey = await session.vaultKeyFromPassword({ keyring: false });
    try {
      const password = await readNewPassword(
        { stdin: false, file: null, fileFrom: null },
        newFile,
        undefined,
        weakAllowed(inv.values['allow-weak-password']),
      );
      try {
        await changePassword(session.dir, vaultKey, password, kdf === undefined ? {} : { kdf });
        out(`Changed the password of the vault at ${session.dir}`);
        if (autoUnlockEnabled(vaultId)) {
          try {
            keyringSet(vaultId, password);
            out('Updated the password stored for auto-unlock.');
          } catch (err) {
            warn(
              `auto-unlock still holds the old password (${errorMessage(err)}); run \`stash vault sessions auto-unlock enable\``,
            );
          }
        }
      } finally {
        wipe(password);
      }
      await session.cache(Buffer.from(vaultId, 'hex'), vaultKey, session.dir);
    } finally {
      wipe(vaultKey);
    }
    return 0;
  } finally {
    session.close();
  }
}
