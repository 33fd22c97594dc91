/**
 * How `stash` starts. bin/stash.js (CommonJS, so that no ES module loader is
 * set up) requires dist/cli/launch.cjs, the CommonJS build of this file,
 * which loads the whole CLI from one CommonJS file, dist/cli/stash.cjs
 * (scripts/bundle-cli.js), with its compiled code cached by code-cache.ts in
 * `<cache folder>/code-cache/` (cache-dir.ts), owner-only, on every Node line.
 * Node 22's own compile cache (module.enableCompileCache) is not used: it keeps
 * only the functions compiled with the file (its top level), so each run
 * compiled again every function the command called, 4-10 ms of CPU a run
 * more than code-cache.ts, whose data is made after the command ran
 * (docs/benchmarks.md). STASH_CODE_CACHE=off
 * compiles without a cache; STASH_CODE_CACHE=trace says on stderr what the
 * cache did. A bundle older than the ES modules it was made from
 * (scripts/compile-src.js run without the bundle step) is not used: the ES modules run instead, slower
 * but current. docs/benchmarks.md has the figures.
 *
 * Note: scripts/compile-src.js rewrites every output, so dist/cli/main.js dates each run of it.
 * Copies of the package (cp -r) may give the files of one folder times a
 * few milliseconds apart in any order, hence the margin.
 */
import { existsSync, statSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { cacheDir } from './cache-dir.js';
import { loadBundle, type BundleFile } from './code-cache.js';

type Main = (argv: string[]) => Promise<void>;

function failedToStart(err: unknown): never {
  process.stderr.write(`stash: failed to start: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(70);
}

/** How much newer dist/cli/main.js may be than the bundle before the bundle counts as stale. */
const STALE_MARGIN_MS = 2000;

/** The bundle's size and time when it exists and dist/cli/main.js is not newer (compile-src.js alone leaves it stale), else null. */
function currentBundle(bundle: string, esm: string): BundleFile | null {
  try {
    const { size, mtimeMs } = statSync(bundle);
    return !existsSync(esm) || statSync(esm).mtimeMs <= mtimeMs + STALE_MARGIN_MS ? { size, mtimeMs } : null;
  } catch {
    return null;
  }
}

/** The word a cache is made for: a command's first word, `help`, `version`, or `other` (never an argument). */
export function commandLabel(argv: string[], firstWords: ReadonlySet<string>): string {
  const [w] = argv;
  if (w === undefined || w === '--help' || w === '-h' || w === 'help') return 'help';
  if (w === '--version' || w === '-V') return 'version';
  return firstWords.has(w) ? w : 'other';
}

/** One STASH_CODE_CACHE=trace line on stderr; a failing stderr loses it (it is a diagnostic of its own). */
function traceLine(text: string): void {
  try {
    writeSync(2, text);
  } catch {
    /* nowhere to report it */
  }
}

/**
 * Loads the CLI and runs it with `argv` (the arguments after the script).
 * `cliDir` is dist/cli (bin/entry.js knows it without a URL round trip).
 */
export function launch(argv: string[], cliDir: string): void {
  const bundle = join(cliDir, 'stash.cjs');
  const esm = join(cliDir, 'main.js');
  const setting = process.env.STASH_CODE_CACHE;
  // Straight to descriptor 2, as the command's own text (output-streams.ts): a stream made here, before the
  // guard, would queue these lines behind which the command's first direct write could land.
  const trace = setting === 'trace' ? (line: string): void => traceLine(`stash: ${line}\n`) : undefined;
  const file = currentBundle(bundle, esm);
  if (file === null) {
    trace?.(`${bundle} is missing or older than ${esm} (run npm run compile): running the ES modules`);
    import(pathToFileURL(esm).href).then((mod: { main: Main }) => mod.main(argv), failedToStart);
    return;
  }
  // The agent runs for hours, the clipboard helper waits to be ended (on a suspend, quickly): they read the cache but never write it.
  const agentMode = argv[0] === '__agent' || argv[0] === '__agent_security_check' || argv[0] === '__clip-clear';
  let main: Main;
  try {
    const dir = setting === 'off' ? null : join(cacheDir(), 'code-cache');
    const loaded = loadBundle(bundle, { dir, file, ...(trace ? { trace } : {}) });
    const exp = loaded.exports as { main: Main; commands: Array<{ path: string[] }> };
    main = exp.main;
    if (!agentMode) loaded.saveOnExit(commandLabel(argv, new Set(exp.commands.map((c) => c.path[0]!))));
  } catch (err) {
    failedToStart(err);
  }
  void main(argv);
}
