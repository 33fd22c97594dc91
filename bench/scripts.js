// The benchmark scripts `npm run bench` runs, in this order (bench/run-all.js);
// test/bench/commands.test.ts runs each in quick mode. A module of its own:
// run-all.js runs the benchmarks when it is imported.
export const SCRIPTS = [
  'keyserver-fetch.js',
  'keyserver-publish.js',
  'keyserver-flow.js',
  'keyserver-fetch-scaling.js',
  'agent-get.js',
  'cli-get.js',
  'inject-scaling.js',
  'suspend-wipe.js',
  'store-memory.js',
  'keyserver-rss.js',
  'keyserver-rss-process.js',
];
