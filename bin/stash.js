#!/usr/bin/env node
// Entry point of the `stash` CLI. CommonJS (bin/package.json), so that a run
// sets up no ES module loader: it loads the CLI bundled into one file with a
// code cache (src/cli/launch.ts), and falls back to the ES modules in dist/.
'use strict';
require('./entry.js').runCli();
