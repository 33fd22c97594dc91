/**
 * `rotateIdentity`: new identity key pairs, a statement signed by the old
 * keys, and every shared container this vault owns re-sealed to the new keys
 * (docs/vault.md, "Identity rotation"). The old secret keys stay in
 * identity.json's retiring block until every owned container is re-sealed,
 * so a crash (or a linked file that is missing) leaves a rotation that the
 * next call finishes with the same new keys.
 */
import { errorMessage } from '../../errors.js';
import { VaultError } from '../errors.js';
import {
  generateKeyPairs,
  identityExtras,
  identityPublic,
  identitySecret,
  wipeKeyPairs,
  writeIdentity,
  type KeyPairs,
} from '../identity.js';
import { withVaultLock } from '../lock.js';
import { requireVaultKey } from '../meta-file.js';
import { listRecords } from '../sharing/records.js';
import { repinResealed, resealContainer } from '../sharing/reseal.js';
import type { PublicIdentity } from '../sharing/verify.js';
import { makeStatement, parseStatement, statementText } from './statement.js';

export interface RotationResult {
  old: PublicIdentity;
  new: PublicIdentity;
  /** The statement in text form. */
  statement: string;
  /** True when an interrupted rotation was finished (no new keys were made). */
  resumed: boolean;
  /** Owned shared containers, re-sealed to the new keys now (revision) or already (null). */
  resealed: Array<{ name: string; revision: number | null }>;
  /** Owned shared containers that could not be re-sealed; the old secret keys are kept until they are. */
  failed: Array<{ name: string; error: string }>;
  /** Shared containers this vault is a member of: their owners must accept the statement. */
  memberOf: Array<{ name: string; owner: PublicIdentity }>;
  /** False while some owned container still needs the old keys (see failed). */
  finished: boolean;
}

const same = (a: PublicIdentity, b: PublicIdentity) => a.ed25519.equals(b.ed25519) && a.x25519.equals(b.x25519);

/** Starts a rotation, or picks up an interrupted one: the old and new key pairs and the statement. */
function begin(
  dir: string,
  vaultKey: Buffer,
): { old: KeyPairs; next: KeyPairs; statement: string; rotations: string[]; resumed: boolean } {
  const meta = requireVaultKey(dir, vaultKey);
  return withVaultLock(dir, () => {
    const extras = identityExtras(dir, vaultKey);
    let current: KeyPairs | null = null;
    let next: KeyPairs | null = null;
    // Every secret key decrypted or made here is wiped unless it is handed to the caller.
    let handed = false;
    try {
      const pub = identityPublic(dir, vaultKey);
      current = { x25519: pub.x25519, ed25519: pub.ed25519, secret: identitySecret(dir, vaultKey) };
      if (extras.retiring) {
        const last = extras.rotations[extras.rotations.length - 1];
        const s = last === undefined ? null : parseStatement(last);
        if (!s || !same(s.old, extras.retiring) || !same(s.new, current)) {
          throw new VaultError(
            'VAULT_CORRUPT',
            `${dir}/identity.json is inconsistent: its retiring keys are not the ones its last rotation statement names`,
          );
        }
        handed = true;
        return { old: extras.retiring, next: current, statement: last!, rotations: extras.rotations, resumed: true };
      }
      next = generateKeyPairs();
      const statement = statementText(makeStatement(current, next, current.secret.ed25519, next.secret.ed25519));
      const rotations = [...extras.rotations, statement];
      writeIdentity(dir, meta.vaultId, vaultKey, next, { rotations, retiring: current });
      handed = true;
      return { old: current, next, statement, rotations, resumed: false };
    } finally {
      if (!handed) {
        wipeKeyPairs(extras.retiring);
        wipeKeyPairs(current);
        wipeKeyPairs(next);
      }
    }
  });
}

/**
 * Rotates the identity of the vault at `dir` (or finishes an interrupted
 * rotation). The vault key must be the vault's.
 */
export function rotateIdentity(dir: string, vaultKey: Buffer): RotationResult {
  const meta = requireVaultKey(dir, vaultKey);
  const { old, next, statement, rotations, resumed } = begin(dir, vaultKey);
  try {
    const result: RotationResult = {
      old: { x25519: old.x25519, ed25519: old.ed25519 },
      new: { x25519: next.x25519, ed25519: next.ed25519 },
      statement,
      resumed,
      resealed: [],
      failed: [],
      memberOf: [],
      finished: false,
    };
    for (const { name, record, problem } of listRecords(dir)) {
      if (!record) {
        result.failed.push({ name, error: problem ?? 'its record is damaged' });
        continue;
      }
      if (same(record.owner, next)) {
        result.resealed.push({ name, revision: null });
      } else if (same(record.owner, old)) {
        try {
          // A crash between the re-seal's file and its record leaves the file owned by the new keys already.
          const done =
            repinResealed(dir, name, old, next) ??
            resealContainer(dir, name, {
              as: old,
              asSecret: old.secret,
              owner: next,
              ownerSecret: next.secret,
            });
          result.resealed.push({ name, revision: done?.revision ?? null });
        } catch (err) {
          if (!(err instanceof VaultError)) throw err;
          result.failed.push({ name, error: errorMessage(err) });
        }
      } else {
        result.memberOf.push({ name, owner: record.owner });
      }
    }
    if (result.failed.length === 0) {
      // Every owned container is sealed to the new keys: the old secret keys leave the vault.
      withVaultLock(dir, () => writeIdentity(dir, meta.vaultId, vaultKey, next, { rotations, retiring: null }));
      result.finished = true;
    }
    return result;
  } finally {
    wipeKeyPairs(old);
    wipeKeyPairs(next);
  }
}
