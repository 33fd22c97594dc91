/**
 * Tests that need an OS facility (a second uid, dbus-daemon, mingw, ...) call
 * `needFacility`. Without the facility the test is skipped with a printed reason,
 * unless STASH_TEST_STRICT=1 or CI=true, where a missing facility is a failure:
 * CI installs every facility (.ci/run), so a skip there would hide a test that never ran.
 */
import { spawnSync } from 'node:child_process';

export const strict = process.env.STASH_TEST_STRICT === '1' || process.env.CI === 'true';

/** Returns true when the test may run; prints "SKIP: ..." and returns false otherwise. */
export function needFacility(available: boolean, what: string, reason: string): boolean {
  if (available) return true;
  if (strict)
    throw new Error(`required facility missing (${what}): ${reason}; STASH_TEST_STRICT=1 and CI=true forbid skipping`);
  console.log(`SKIP: ${what}: ${reason}`);
  return false;
}

/** True when `cmd` is on PATH. */
export function haveCommand(cmd: string): boolean {
  return spawnSync('sh', ['-c', `command -v ${cmd}`], { stdio: 'ignore' }).status === 0;
}

export const isRoot = typeof process.getuid === 'function' && process.getuid() === 0;

import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join, relative } from 'node:path';
import { pathToFileURL } from 'node:url';

/** `node` arguments that run TypeScript through tsx, from any working directory (for `-e`). */
export const tsxNode: string[] = [
  process.execPath,
  '--import',
  pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href,
];

/**
 * The command and arguments that run the TypeScript file `file` with `args`: its compiled
 * .js from test/run.js's compiled copy (test/compile-tests.js, named in STASH_TEST_COMPILED)
 * where there is one, else through tsx, which costs 0.3 s of CPU more per start. `file`
 * may be in the checkout or in the copy (a path built from a suite's import.meta.url).
 */
export function tsNode(file: string, ...args: string[]): [string, string[]] {
  const compiled = process.env.STASH_TEST_COMPILED;
  if (file.endsWith('.ts')) {
    const js = `${file.slice(0, -3)}.js`;
    const rel = relative(process.cwd(), js);
    for (const candidate of [js, ...(compiled && !rel.startsWith('..') ? [join(compiled, rel)] : [])])
      if (existsSync(candidate)) return [process.execPath, ['--enable-source-maps', candidate, ...args]];
  }
  return [tsxNode[0]!, [...tsxNode.slice(1), file, ...args]];
}
