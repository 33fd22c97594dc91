import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { packageRoot } from '../native/binding.js';

/** The package version from package.json. */
export function readVersion(): string {
  const pkg = JSON.parse(readFileSync(join(packageRoot, 'package.json'), 'utf8')) as { version?: string };
  return pkg.version ?? 'unknown';
}
