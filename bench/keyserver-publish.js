// Publish throughput of the key server (each acknowledged after fdatasync,
// group commit) beside a bare node:http server answering the same-sized body
// (which writes nothing: the ratio shows the price of durability and checks).
// Target: >= 0.25 x bare node:http's requests/s on the same core.
//   node bench/keyserver-publish.js      (BENCH_QUICK=1 for a tiny run)
import { compareWithBare } from './keyserver-vs-bare.js';

await compareWithBare({
  title: 'Key server publish vs bare node:http',
  command: 'bench-http',
  requests: 20000,
  quickRequests: 200,
  target: 0.25,
  figure: 'publishes',
});
