#!/usr/bin/env node
// Entry point of `stash_key_server` (its ES modules in dist/).
'use strict';
require('./entry.js').runEntry('../dist/keyserver/main.js');
