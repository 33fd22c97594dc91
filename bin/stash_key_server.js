#!/usr/bin/env node
// Entry point of `stash_key_server`.
import { runEntry } from './entry.js';

runEntry('../dist/keyserver/main.js', import.meta.url);
