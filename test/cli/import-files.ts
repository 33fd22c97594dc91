/**
 * What the `stash import` suites share: private copies of the export
 * fixtures (test/fixtures/import/), and the check that no value reached the
 * output.
 */
import { chmodSync, copyFileSync } from 'node:fs';
import { join } from 'node:path';
import * as assert from 'uvu/assert';
import type { CliEnv } from './harness.js';

export const fixtures = join(process.cwd(), 'test', 'fixtures', 'import');

/** A private copy of a fixture in the test's home (0600, as an export should be); its path. */
export function copyFixture(t: CliEnv, name: string): string {
  const path = join(t.home, name);
  copyFileSync(join(fixtures, name), path);
  chmodSync(path, 0o600);
  return path;
}

/** Fails when any of `values` (as the export holds them) appears in `text`. */
export function holdsNone(text: string, values: string[]): void {
  for (const v of values) assert.not.ok(text.includes(v), `output holds the value ${JSON.stringify(v)}`);
}

/** A table printed by the CLI as rows of cells (columns are separated by two spaces or more). */
export function tableOf(stdout: string): string[][] {
  return stdout.split('\n').map((l) => l.split(/ {2,}/));
}

/** `stash import FORMAT <a copy of FIXTURE> --into CONTAINER ...extra`, the vault password given by file. */
export function importFixture(
  t: CliEnv,
  format: string,
  fixture: string,
  into: string,
  extra: string[] = [],
): ReturnType<CliEnv['run']> {
  return t.run(['import', format, copyFixture(t, fixture), '--into', into, ...extra, '--password-file', t.pwFile]);
}
