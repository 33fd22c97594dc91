#!/usr/bin/env node
// Compiles src/**/*.ts to dist/ (ES modules, one .js per .ts, the same layout), the first
// step of `npm run compile` and `prepare`; scripts/bundle-cli.js runs next. esbuild strips
// the types in about half a second where `tsc` took 12 s of CPU, and a CI run compiles the
// tree six times (npm ci under four Node lines, npm test, the release). The types are checked
// by `npm run typecheck` (tsc --noEmit over src and test), which `npm test` runs; tsconfig's
// isolatedModules makes it refuse what a one-file-at-a-time compiler cannot compile as tsc
// would (a type re-exported without `type`, a const enum used across files).
// Files are overwritten in place, as tsc did (a process reading dist/ meanwhile never finds
// it gone); then a .js whose source is gone is removed, so the bundle and the package
// cannot pick up a module that no longer exists.
//   node scripts/compile-src.js
import { buildSync } from 'esbuild';
import { existsSync, readdirSync, rmSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const src = join(root, 'src');
const dist = join(root, 'dist');

const files = (dir) =>
  existsSync(dir)
    ? readdirSync(dir, { recursive: true, withFileTypes: true })
        .filter((e) => e.isFile())
        .map((e) => join(e.parentPath ?? e.path, e.name))
    : [];
const entries = files(src).filter((f) => f.endsWith('.ts') && !f.endsWith('.d.ts'));

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
for (const f of files(dist)) {
  if (f.endsWith('.js') && !existsSync(join(src, relative(dist, f)).replace(/\.js$/, '.ts'))) rmSync(f);
}
