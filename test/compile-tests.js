// Compiles test/ and src/ (TypeScript) to plain JavaScript for one run of test/run.js, so
// that each suite starts as `node file.js` rather than through tsx: tsx costs 0.3-0.4 s of
// CPU per start (its loader thread, esbuild's service, the transform cache), and a CI run
// starts about 310 suites. One esbuild call compiles the whole tree in about a second.
//
// The copy keeps the checkout's layout, so every path a suite builds from import.meta.url
// still lands where it did: test/ and src/ hold the compiled .js beside a symbolic link to
// each original file (a fixture a suite starts through tsx, `./fixtures/x.ts`, is the
// original), and every other top-level entry (bin, dist, native, package.json...) is a link
// to the checkout's own. It lives under node_modules/.cache, so bare imports resolve to the
// checkout's node_modules, in a folder per user (a run as root must not leave one that
// another user cannot write) and one of its own per run, so two runs in one checkout (CI
// runs the release suites beside the others) never share one. Folders created at the top
// of the checkout after the copy was made (build/, prebuilds/) are not in it.
import { buildSync } from 'esbuild';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';

/** The .ts files below `dir` (relative to root), each other file linked into `out`. */
function mirror(root, out, dir, entries) {
  mkdirSync(join(out, dir), { recursive: true });
  for (const e of readdirSync(join(root, dir), { withFileTypes: true })) {
    const rel = join(dir, e.name);
    if (e.isDirectory()) {
      mirror(root, out, rel, entries);
      continue;
    }
    if (e.name.endsWith('.ts') && !e.name.endsWith('.d.ts')) {
      // esbuild writes x.js into the copy; were x.js a link too, it would write through it.
      if (existsSync(join(root, rel.replace(/\.ts$/, '.js')))) throw new Error(`${rel} and a .js of the same name`);
      entries.push(join(root, rel));
    }
    symlinkSync(join(root, rel), join(out, rel));
  }
}

/** Removes a copy; one that cannot be removed is left (it only takes room), never a failure. */
function removeQuietly(dir) {
  try {
    rmSync(dir, { recursive: true, force: true });
  } catch {
    /* left for a later run's clean-up */
  }
}

function alive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return err.code === 'EPERM';
  }
}

/**
 * Writes the compiled copy into a new folder below root/node_modules/.cache/stash-tests and
 * returns that folder; `remove()` deletes it. Throws with esbuild's message when a file
 * does not compile.
 */
export function compileTests(root) {
  const uid = typeof process.getuid === 'function' ? process.getuid() : 'user';
  const base = join(root, 'node_modules', '.cache', `stash-tests-${uid}`);
  mkdirSync(base, { recursive: true });
  // The copies of runs that were killed before they could remove their own.
  for (const name of readdirSync(base)) {
    const pid = Number(/^run-([0-9]+)-/.exec(name)?.[1]);
    if (pid && !alive(pid)) removeQuietly(join(base, name));
  }
  const out = mkdtempSync(join(base, `run-${process.pid}-`));
  try {
    const entries = [];
    for (const dir of ['src', 'test']) mirror(root, out, dir, entries);
    for (const name of readdirSync(root)) {
      if (['src', 'test', 'node_modules', '.git'].includes(name)) continue;
      symlinkSync(join(root, name), join(out, name));
    }
    buildSync({
      entryPoints: entries,
      outbase: root,
      outdir: out,
      bundle: false,
      format: 'esm',
      platform: 'node',
      target: 'node20',
      // A failing assertion's stack names the .ts line (test/run.js starts suites with
      // --enable-source-maps).
      sourcemap: 'inline',
      logLevel: 'silent',
    });
  } catch (err) {
    removeQuietly(out);
    throw err;
  }
  return { dir: out, remove: () => removeQuietly(out) };
}
