/** Copying a vault folder committed under test/fixtures to where a test's stash looks for its vault. */
import { chmodSync, cpSync, readdirSync } from 'node:fs';
import { join } from 'node:path';

/**
 * Copies `fixture`/vault to `vault` with the modes stash gives its files (git keeps
 * none): 0700 folders, 0600 files. The fixture itself is never written.
 */
export function copyFixtureVault(fixture: string, vault: string): void {
  cpSync(join(fixture, 'vault'), vault, { recursive: true });
  chmodSync(vault, 0o700);
  chmodSync(join(vault, 'containers'), 0o700);
  for (const f of ['vault.json', 'identity.json', 'contacts.stash']) chmodSync(join(vault, f), 0o600);
  for (const f of readdirSync(join(vault, 'containers'))) chmodSync(join(vault, 'containers', f), 0o600);
}
