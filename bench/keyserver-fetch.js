// Fetch throughput of the key server on one core beside a bare node:http
// server answering the same-sized body. Target: ratio >= 0.6.
//   node bench/keyserver-fetch.js        (BENCH_QUICK=1 for a tiny run)
import { compareWithBare } from './keyserver-vs-bare.js';

await compareWithBare({ title: 'Key server fetch vs bare node:http', command: 'bench-http-fetch', requests: 50000, quickRequests: 300, target: 0.6 });
