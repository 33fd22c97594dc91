/**
 * `stash vault identity show`: the vault owner's public keys and fingerprint.
 * Needs no password: identity.json keeps the public half in the clear.
 */
import { defaultVaultDir, encodePublicKey, identityPublic, readVaultInfo } from '../../vault/index.js';
import { fingerprintLines } from '../../vault/fingerprint-display.js';
import { out, outJson } from '../output.js';
import type { Invocation } from '../command-types.js';

export async function run(inv: Invocation): Promise<number> {
  const dir = defaultVaultDir();
  const info = readVaultInfo(dir);
  const id = identityPublic(dir);
  const publicKey = encodePublicKey({ x25519: id.x25519, ed25519: id.ed25519 }).toString('base64url');
  if (inv.values.json === true) {
    outJson({
      vaultDir: dir,
      vaultId: info.vaultId,
      fingerprint: id.fingerprint,
      publicKey,
      x25519: id.x25519.toString('hex'),
      ed25519: id.ed25519.toString('hex'),
    });
    return 0;
  }
  out(`Vault:       ${dir}`);
  out(`Fingerprint: ${id.fingerprint}`);
  out('');
  out('Read it aloud group by group; the other side compares each group:');
  for (const line of fingerprintLines(id.fingerprint)) out(line);
  out('');
  out(`Public key:  ${publicKey}`);
  return 0;
}
