/**
 * One warm code cache for every test environment of a run. The CLI writes its V8 code
 * cache (src/cli/code-cache.ts) at the exit of
 * the first command of each word in a new cache folder, about 26 ms of CPU each, and
 * every test environment is a new HOME: a CI run paid that some thousands of times.
 * test/run.js makes one folder per run (STASH_TEST_CODE_CACHE); a new environment
 * starts with a copy of it, and gives back what its commands wrote when it is cleaned
 * up (each file written to a temporary name and renamed, so a suite beside it reads a
 * whole file or none; the CLI checks every file it reads whichever one wins).
 * A suite that looks at the cache folder itself (test/cli/code-cache.test.ts) opts
 * out with `cliEnv({ STASH_TEST_CODE_CACHE: undefined })`.
 */
import { chmodSync, copyFileSync, existsSync, mkdirSync, readdirSync, renameSync, statSync, utimesSync } from 'node:fs';
import { join } from 'node:path';

/** The folders below XDG_CACHE_HOME that hold code caches. */
const FOLDERS = [join('stash', 'code-cache')];

const myUid = typeof process.getuid === 'function' ? process.getuid() : -1;

/**
 * Copies every file below `from` into `to` (folders 0700, files 0600, each renamed into
 * place with its source's modification time), but a file whose copy has the same size and
 * time already (unchanged since it was seeded), and, when `onlyOurs`, a file this user does
 * not own or others may write: the CLI never reads such a file, and the seed must not turn
 * one into a file it would read.
 */
function copyTree(from: string, to: string, onlyOurs: boolean): void {
  mkdirSync(to, { recursive: true, mode: 0o700 });
  chmodSync(to, 0o700);
  for (const e of readdirSync(from, { withFileTypes: true })) {
    const src = join(from, e.name);
    const dest = join(to, e.name);
    if (e.isDirectory()) {
      copyTree(src, dest, onlyOurs);
      continue;
    }
    if (!e.isFile() || e.name.includes('.seed-')) continue;
    const st = statSync(src);
    if (onlyOurs && (st.uid !== myUid || (st.mode & 0o022) !== 0)) continue;
    if (existsSync(dest)) {
      const d = statSync(dest);
      if (d.size === st.size && Math.abs(d.mtimeMs - st.mtimeMs) < 1) continue;
    }
    const tmp = `${dest}.seed-${process.pid}-${Math.random().toString(36).slice(2)}`;
    copyFileSync(src, tmp);
    chmodSync(tmp, 0o600);
    utimesSync(tmp, st.atimeMs / 1000, st.mtimeMs / 1000);
    renameSync(tmp, dest);
  }
}

/** Puts the run's warm cache into a new environment's XDG_CACHE_HOME. */
export function seedCodeCache(seed: string, cacheHome: string): void {
  mkdirSync(join(cacheHome, 'stash'), { recursive: true, mode: 0o700 });
  for (const f of FOLDERS) if (existsSync(join(seed, f))) copyTree(join(seed, f), join(cacheHome, f), false);
}

/** Gives what an environment's commands wrote back to the run's cache. Never fails a test. */
export function returnCodeCache(seed: string, cacheHome: string): void {
  try {
    for (const f of FOLDERS) if (existsSync(join(cacheHome, f))) copyTree(join(cacheHome, f), join(seed, f), true);
  } catch {
    /* the cache only saves time */
  }
}
