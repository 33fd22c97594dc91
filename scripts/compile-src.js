#!/usr/bin/env node
// Compiles src/**/*.ts to dist/ (ES modules, one .js per .ts, the same layout), the first
// step of `npm run compile` and `prepare`; scripts/bundle-cli.js runs next. esbuild strips
// the types in about half a second where `tsc` took 12 s of CPU, and a CI run compiles the
// tree six times (npm ci under four Node lines, npm test, the release). The types are checked
// by `npm run typecheck` (tsc --noEmit over src and test), which `npm test` runs: nothing
// in src needs tsc to emit it (no const enum, namespace or decorator; imports used only as
// types are dropped by both). dist/ is emptied first, so a removed source leaves no module
// behind for the bundle or the package to pick up.
//   node scripts/compile-src.js
import { buildSync } from 'esbuild';
import { readdirSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const src = join(root, 'src');
const dist = join(root, 'dist');

const entries = readdirSync(src, { recursive: true, withFileTypes: true })
  .filter((e) => e.isFile() && e.name.endsWith('.ts') && !e.name.endsWith('.d.ts'))
  .map((e) => join(e.parentPath ?? e.path, e.name));

rmSync(dist, { recursive: true, force: true });
try {
  buildSync({
    entryPoints: entries,
    outbase: src,
    outdir: dist,
    bundle: false,
    format: 'esm',
    platform: 'node',
    target: 'es2022', // tsconfig.json's target: the syntax is left as written
    logLevel: 'silent',
  });
} catch (err) {
  console.error(`scripts/compile-src.js: ${err.message}`);
  process.exit(1);
}
