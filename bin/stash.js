#!/usr/bin/env node
// Entry point of the `stash` CLI. Kept tiny: everything else loads lazily.
import { runEntry } from './entry.js';

runEntry('../dist/cli/main.js', import.meta.url);
