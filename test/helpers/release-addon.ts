/**
 * The addon built as the release builds it (scripts/release/build.js:
 * cmake-js with the target's toolchain file), once per test run. The Wine
 * suites (test/agent/windows-pipe.test.ts, test/cli/windows-prompt.test.ts)
 * each need the win32-x64 build, and build.js builds into the checkout's
 * build-release/<target>/, which it empties first: two suites building at
 * once could pull that folder from under each other, and each build costs
 * about 7 s of CPU.
 *
 * Every build goes to a folder of its own (build.js --build-dir), never to
 * the checkout's build-release/, which `npm run release` uses. Under
 * test/run.js (STASH_TEST_COMPILED names the run's folder) the first suite
 * to ask builds while holding a lock (a folder holding its pid, renamed into
 * place, so the pid is there as soon as the lock is); the others wait for
 * its result, bounded, and copy it. A failed build is recorded, so the
 * others fail with its output instead of building again. Outside
 * test/run.js each call builds in a temporary folder.
 */
import { spawnSync } from 'node:child_process';
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { alive, sleepSync } from '../../src/process-state.js';

export interface AddonBuild {
  ok: boolean;
  /** The build's output when it failed (or why waiting for it did). */
  output: string;
}

/** Far below a suite's timeout (test/run.js, 600 s), so a waiter says why it gave up. */
const WAIT_MS = 240_000;

/** build.js in `buildDir`, the result copied to `copyTo`. */
function build(target: string, buildDir: string, copyTo: string): AddonBuild {
  mkdirSync(dirname(copyTo), { recursive: true });
  const r = spawnSync(process.execPath, ['scripts/release/build.js', target, copyTo, '--build-dir', buildDir], {
    encoding: 'utf8',
    maxBuffer: 64 << 20,
  });
  if (r.status === 0) return { ok: true, output: '' };
  const how = r.error ? r.error.message : r.signal ? `killed by ${r.signal}` : `exit ${r.status}`;
  return { ok: false, output: `scripts/release/build.js ${target}: ${how}\n${r.stdout ?? ''}${r.stderr ?? ''}` };
}

function copyOut(from: string, copyTo: string): AddonBuild {
  mkdirSync(dirname(copyTo), { recursive: true });
  copyFileSync(from, copyTo);
  return { ok: true, output: '' };
}

/** Puts `target`'s release build of the addon at `copyTo` (a .node file). */
export function releaseAddon(target: string, copyTo: string): AddonBuild {
  const run = process.env.STASH_TEST_COMPILED;
  if (!run) {
    const scratch = mkdtempSync(join(tmpdir(), `stash-addon-${target}-`));
    try {
      return build(target, join(scratch, 'build'), copyTo);
    } finally {
      rmSync(scratch, { recursive: true, force: true });
    }
  }
  const dir = join(run, `release-addon-${target}`);
  const done = join(dir, 'addon.node');
  const failed = join(dir, 'failed.txt');
  const claim = `${dir}.claim-${process.pid}`;
  mkdirSync(claim, { mode: 0o700 });
  writeFileSync(join(claim, 'pid'), String(process.pid));
  try {
    renameSync(claim, dir);
  } catch (err) {
    rmSync(claim, { recursive: true, force: true });
    const code = (err as NodeJS.ErrnoException).code;
    if (code !== 'ENOTEMPTY' && code !== 'EEXIST') throw err;
    // Another suite builds it: wait for its result, or for it to die without one.
    const pid = Number(readFileSync(join(dir, 'pid'), 'utf8'));
    for (const deadline = Date.now() + WAIT_MS; ; sleepSync(200)) {
      if (existsSync(done)) return copyOut(done, copyTo);
      if (existsSync(failed)) return { ok: false, output: readFileSync(failed, 'utf8') };
      if (!alive(pid)) return { ok: false, output: `the suite building ${target} (pid ${pid}) ended without a result` };
      if (Date.now() > deadline)
        return { ok: false, output: `waited ${WAIT_MS / 1000} s for ${target}'s build (pid ${pid})` };
    }
  }
  let result: AddonBuild;
  try {
    const partial = join(dir, 'addon.node.partial');
    result = build(target, join(dir, 'build'), partial);
    if (result.ok) renameSync(partial, done);
  } catch (err) {
    result = { ok: false, output: `building ${target}: ${err instanceof Error ? err.message : String(err)}` };
  }
  if (!result.ok) {
    writeFileSync(failed, result.output);
    return result;
  }
  return copyOut(done, copyTo);
}
