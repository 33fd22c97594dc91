/**
 * `stash vault recover` and `stash vault recovery-key status|create|remove`
 * (src/vault/recovery-key.ts). recover sets a new password with the recovery
 * key alone; create needs the current password (a cached key is not proof
 * enough that the person at the keyboard knows it).
 */
import { StashError, UsageError } from '../../errors.js';
import { changePassword } from '../../vault/vault.js';
import {
  createRecoveryKey,
  formatRecoveryKey,
  parseRecoveryKey,
  recoveryKeyStatus,
  removeRecoveryKey,
  unlockWithRecoveryKey,
} from '../../vault/recovery-key.js';
import { wipe } from '../../vault/secure.js';
import { readFileSecure, readFdSecure } from '../secure-read.js';
import { out, outJson } from '../output.js';
import { readNewPassword } from '../password.js';
import { weakAllowed } from '../password-strength.js';
import type { Invocation } from '../command-types.js';
import { Session } from '../session.js';
import { isTerminal } from '../terminal.js';

/** What to print when a key is made: the key, and how to keep it. */
export function recoveryKeyLines(key: Buffer): string[] {
  return [
    'Recovery key (shown once; write it down and keep it apart from this computer):',
    '',
    `    ${formatRecoveryKey(key)}`,
    '',
    'With it, `stash vault recover` sets a new password if you forget yours. Anyone who has it can open this vault.',
  ];
}

async function readRecovery(inv: Invocation, session: Session): Promise<Buffer> {
  const file = typeof inv.values['recovery-key-file'] === 'string' ? inv.values['recovery-key-file'] : null;
  let text: Buffer;
  if (file !== null) {
    text = readFileSecure(file, { maxBytes: 512, what: 'recovery key file', stripNewline: true });
  } else if (!isTerminal(0)) {
    if (session.source.stdin)
      throw new UsageError(
        'the recovery key and the new password cannot both come from standard input: give one with --recovery-key-file or --password-file',
      );
    text = readFdSecure(0, { maxBytes: 512, what: 'the recovery key on standard input', stripNewline: true });
  } else {
    const { promptHidden } = await import('../prompt.js');
    text = await promptHidden('Recovery key: ', 512);
  }
  try {
    return parseRecoveryKey(text.toString('utf8'));
  } finally {
    wipe(text);
  }
}

export async function run(inv: Invocation): Promise<number> {
  const action = inv.command.path[inv.command.path.length - 1];
  const session = new Session(inv.values);
  try {
    switch (action) {
      case 'recover':
        return await recover(inv, session);
      case 'status': {
        const status = recoveryKeyStatus(session.dir);
        if (inv.values.json === true) outJson({ recoveryKey: status !== null, createdAt: status?.createdAt ?? null });
        else
          out(
            status
              ? `The vault at ${session.dir} has a recovery key, made ${status.createdAt}.`
              : `The vault at ${session.dir} has no recovery key (stash vault recovery-key create makes one).`,
          );
        return 0;
      }
      case 'create': {
        const vaultKey = await session.vaultKeyFromPassword({ keyring: false });
        try {
          const replaced = recoveryKeyStatus(session.dir) !== null;
          const key = createRecoveryKey(session.dir, vaultKey);
          try {
            if (inv.values.json === true) outJson({ recoveryKey: formatRecoveryKey(key), replaced });
            else {
              for (const line of recoveryKeyLines(key)) out(line);
              if (replaced) out('The previous recovery key no longer works.');
            }
          } finally {
            wipe(key);
          }
          return 0;
        } finally {
          wipe(vaultKey);
        }
      }
      default: {
        const vaultKey = await session.vaultKeyFromPassword({ keyring: false });
        try {
          out(
            removeRecoveryKey(session.dir, vaultKey)
              ? 'Removed the recovery key: it no longer opens the vault.'
              : 'The vault has no recovery key; nothing changed.',
          );
          return 0;
        } finally {
          wipe(vaultKey);
        }
      }
    }
  } finally {
    session.close();
  }
}

async function recover(inv: Invocation, session: Session): Promise<number> {
  if (recoveryKeyStatus(session.dir) === null)
    throw new StashError(
      'NO_RECOVERY_KEY',
      `the vault at ${session.dir} has no recovery key, so it cannot be recovered without its password`,
    );
  const recovery = await readRecovery(inv, session);
  let vaultKey: Buffer;
  try {
    vaultKey = unlockWithRecoveryKey(session.dir, recovery);
  } finally {
    wipe(recovery);
  }
  try {
    const password = await readNewPassword(
      session.source,
      null,
      'new vault password',
      weakAllowed(inv.values['allow-weak-password']),
    );
    try {
      await changePassword(session.dir, vaultKey, password);
    } finally {
      wipe(password);
    }
    out(`Set a new password for the vault at ${session.dir}; every container opens with it.`);
    out('The recovery key still works. If anyone may have seen it, make a new one: stash vault recovery-key create');
    return 0;
  } finally {
    wipe(vaultKey);
  }
}
