// Whole flows through the key server: publish, confirm the mailed link, fetch
// (`stash_key_server bench-http-flow`, three requests, two of them durable
// writes), beside a bare node:http server on the same core. The ratio is 3 x
// flows/s against the bare server's requests/s (target >= 0.35).
//   node bench/keyserver-flow.js         (BENCH_QUICK=1 for a tiny run)
import { compareWithBare } from './keyserver-vs-bare.js';

await compareWithBare({
  title: 'Key server flows (publish, confirm, fetch) vs bare node:http',
  command: 'bench-http-flow',
  requests: 10000,
  quickRequests: 100,
  target: 0.35,
  perOperation: 3,
  figure: 'flows',
});
