/**
 * The package version, for `stash --version` and `stash_key_server --version`.
 * Here, beside errors.ts, rather than in src/cli: the key server needs it too and
 * never imports the CLI. The package root is found from this file's own place
 * (dist/version.js), as native/binding.ts finds it, without loading that module;
 * the key server's single executable replaces this module with the version fixed
 * at build time (scripts/release/bundle-keyserver.js).
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

/** The package version from package.json. */
export function readVersion(): string {
  const path = fileURLToPath(new URL('../package.json', import.meta.url));
  const pkg = JSON.parse(readFileSync(path, 'utf8')) as { version?: string };
  return pkg.version ?? 'unknown';
}
