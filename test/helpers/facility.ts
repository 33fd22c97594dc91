/**
 * Tests that need an OS facility (a second uid, dbus-daemon, mingw, ...) call
 * `needFacility`. Without the facility the test is skipped with a printed reason,
 * unless STASH_TEST_STRICT=1 (as in CI), where a missing facility is a failure.
 */
import { spawnSync } from 'node:child_process';

export const strict = process.env.STASH_TEST_STRICT === '1';

/** Returns true when the test may run; prints "SKIP: ..." and returns false otherwise. */
export function needFacility(available: boolean, what: string, reason: string): boolean {
  if (available) return true;
  if (strict) throw new Error(`required facility missing (${what}): ${reason}; STASH_TEST_STRICT=1 forbids skipping`);
  console.log(`SKIP: ${what}: ${reason}`);
  return false;
}

/** True when `cmd` is on PATH. */
export function haveCommand(cmd: string): boolean {
  return spawnSync('sh', ['-c', `command -v ${cmd}`], { stdio: 'ignore' }).status === 0;
}

export const isRoot = typeof process.getuid === 'function' && process.getuid() === 0;

import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';

/** `node` arguments that run a TypeScript file from any working directory. */
export const tsxNode: string[] = [
  process.execPath,
  '--import',
  pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href,
];
