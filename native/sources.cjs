// Prints one platform's list from native/sources.json, one file per line, for
// binding.gyp's command expansion: <!@(node native/sources.cjs linux)
'use strict';
const list = require('./sources.json');
const group = process.argv[2];
if (!Array.isArray(list[group])) {
  console.error(`native/sources.cjs: no source group ${JSON.stringify(group)} (common, linux, mac, win)`);
  process.exit(2);
}
console.log(list[group].join('\n'));
