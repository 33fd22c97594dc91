/**
 * This vault's own last rotation statement, checked before it is handed out
 * (docs/vault.md, "Where it lives"). identity.json keeps `rotations` in the
 * clear, bound to nothing the vault key protects, so someone who can write
 * the vault folder and holds an old key could put in a statement from that
 * key to one of their own. Only a list that chains (each statement's new key
 * is the next one's old key) and ends at the key the vault key unlocks is
 * sent out.
 */
import { VaultError } from '../errors.js';
import { fingerprintOf, formatFingerprint } from '../fingerprint.js';
import { identityExtras, identityPublic, wipeKeyPairs } from '../identity.js';
import type { PublicKeys } from '../public-key.js';
import { parseStatement, type RotationStatement } from './statement.js';

const same = (a: PublicKeys, b: PublicKeys) => a.ed25519.equals(b.ed25519) && a.x25519.equals(b.x25519);
const fp = (k: PublicKeys) => formatFingerprint(fingerprintOf(k.x25519, k.ed25519));

/**
 * The last rotation statement of the vault at `dir` and its text, or null
 * when it never rotated. VAULT_CORRUPT when the list does not chain or does
 * not end at the vault's current key; BAD_ROTATION for a damaged statement.
 */
export function ownStatement(dir: string, vaultKey: Buffer): { text: string; statement: RotationStatement } | null {
  const path = `${dir}/identity.json`;
  const extras = identityExtras(dir, vaultKey);
  wipeKeyPairs(extras.retiring);
  const list = extras.rotations.map((text) => parseStatement(text));
  if (list.length === 0) return null;
  for (let i = 1; i < list.length; i++) {
    if (!same(list[i - 1]!.new, list[i]!.old)) {
      throw new VaultError(
        'VAULT_CORRUPT',
        `${path} was modified: its rotation statements do not follow on (statement ${i + 1} starts from ${fp(list[i]!.old)}, ` +
          `not from ${fp(list[i - 1]!.new)}); it was not sent out`,
      );
    }
  }
  const last = list[list.length - 1]!;
  const current = identityPublic(dir, vaultKey);
  if (!same(last.new, current)) {
    throw new VaultError(
      'VAULT_CORRUPT',
      `${path} was modified: its last rotation statement hands over to ${fp(last.new)}, not to this vault's key ` +
        `${current.fingerprint}; it was not sent out. Check who can write the vault folder; contacts can take your current key with a fingerprint check (stash vault identity publish)`,
    );
  }
  return { text: extras.rotations[extras.rotations.length - 1]!, statement: last };
}
