// Shared by the two executables (CommonJS, see bin/package.json). A missing
// dist/ (TypeScript not compiled) gets a clear message, not a stack.
'use strict';
const { existsSync } = require('node:fs');
const { join } = require('node:path');
const { pathToFileURL } = require('node:url');

function missing(file) {
  process.stderr.write(
    `stash: ${file} is missing: the TypeScript sources are not compiled. ` +
      'Run `npm install` (or `npm run compile`) in the package folder.\n',
  );
  process.exit(70);
}

/** Imports a compiled ES module (relative to bin/) and runs its main(). */
function runEntry(relative) {
  const file = join(__dirname, relative);
  if (!existsSync(file)) missing(file);
  import(pathToFileURL(file).href).then(
    (mod) => mod.main(process.argv.slice(2)),
    (err) => {
      process.stderr.write(`stash: failed to start: ${err?.message ? err.message : err}\n`);
      process.exit(70);
    },
  );
}

/** The CLI: through the launcher (dist/cli/launch.cjs) when `npm run compile` made it, else its ES modules. */
function runCli() {
  const cli = join(__dirname, '..', 'dist', 'cli');
  const launcher = join(cli, 'launch.cjs');
  if (!existsSync(launcher)) return runEntry('../dist/cli/main.js');
  return require(launcher).launch(process.argv.slice(2), cli);
}

module.exports = { runCli, runEntry };
