/**
 * The addon built as the release builds it (scripts/release/build.js:
 * cmake-js with the target's toolchain file), once per test run. The Wine
 * suites (test/agent/windows-pipe.test.ts, test/cli/windows-prompt.test.ts)
 * each need the win32-x64 build, and build.js builds into the checkout's
 * build-release/<target>/, which it empties first: two suites building at
 * once could pull that folder from under each other, and each build costs
 * about 7 s of CPU.
 *
 * Under test/run.js (STASH_TEST_COMPILED names the run's folder) the first
 * suite to ask builds while holding a lock (a folder made with mkdir, with
 * its pid inside); the others wait for its result, bounded, and copy it. A
 * failed build is recorded, so the others fail with its output instead of
 * building again. Outside test/run.js each call builds.
 */
import { spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';

export interface AddonBuild {
  ok: boolean;
  /** The build's output when it failed (or why waiting for it did). */
  output: string;
}

const WAIT_MS = 10 * 60_000;

function sleepSync(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

function build(target: string, copyTo: string): AddonBuild {
  mkdirSync(dirname(copyTo), { recursive: true });
  const r = spawnSync(process.execPath, ['scripts/release/build.js', target, copyTo], {
    encoding: 'utf8',
    maxBuffer: 64 << 20,
  });
  return r.status === 0 ? { ok: true, output: '' } : { ok: false, output: `${r.stdout ?? ''}${r.stderr ?? r.error}` };
}

/** Puts `target`'s release build of the addon at `copyTo` (a .node file). */
export function releaseAddon(target: string, copyTo: string): AddonBuild {
  const run = process.env.STASH_TEST_COMPILED;
  if (!run) return build(target, copyTo);
  const dir = join(run, `release-addon-${target}`);
  const done = join(dir, 'addon.node');
  const failed = join(dir, 'failed.txt');
  try {
    mkdirSync(dir, { mode: 0o700 });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    // Another suite builds it: wait for its result, or for it to die without one.
    const deadline = Date.now() + WAIT_MS;
    for (;;) {
      if (existsSync(done)) {
        mkdirSync(dirname(copyTo), { recursive: true });
        copyFileSync(done, copyTo);
        return { ok: true, output: '' };
      }
      if (existsSync(failed)) return { ok: false, output: readFileSync(failed, 'utf8') };
      let pid = 0;
      try {
        pid = Number(readFileSync(join(dir, 'pid'), 'utf8'));
      } catch {
        /* not written yet */
      }
      if (pid > 0 && !alive(pid)) return { ok: false, output: `the suite building ${target} (pid ${pid}) died` };
      if (Date.now() > deadline) return { ok: false, output: `waited ${WAIT_MS / 1000} s for ${target}'s build` };
      sleepSync(200);
    }
  }
  writeFileSync(join(dir, 'pid'), String(process.pid));
  const partial = join(dir, 'addon.node.partial');
  const result = build(target, partial);
  if (result.ok) {
    renameSync(partial, done);
    mkdirSync(dirname(copyTo), { recursive: true });
    copyFileSync(done, copyTo);
  } else {
    writeFileSync(failed, result.output);
  }
  return result;
}
