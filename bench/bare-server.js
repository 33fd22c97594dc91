// The baseline of the key server scripts: a bare node:http server that reads
// the request body and answers. Prints its URL.
//   node bench/bare-server.js BYTES [STATUS]     `BYTES` bytes of 'a', Content-Type and Content-Length only
//   node bench/bare-server.js --exact JSON       exactly this answer: {"status", "headers": [[name, value], ...], "body": base64}
//                                                (the key server's own answer, captured by bench/wrk.js: the same bytes and headers)
// Written as anyone would write it with node:http: writeHead, then end(body).
import { createServer } from 'node:http';

let status;
let headers;
let answer;
if (process.argv[2] === '--exact') {
  const spec = JSON.parse(process.argv[3]);
  status = spec.status;
  headers = spec.headers.flat();
  answer = Buffer.from(spec.body, 'base64');
} else {
  answer = Buffer.alloc(Number(process.argv[2] ?? 128), 0x61);
  status = Number(process.argv[3] ?? 200);
  headers = { 'Content-Type': 'application/vnd.stash.v1+binary', 'Content-Length': answer.length };
}
const server = createServer({ keepAliveTimeout: 5000 }, (req, res) => {
  req.on('data', () => {});
  req.on('end', () => {
    res.writeHead(status, headers);
    res.end(answer);
  });
});
server.listen(0, '127.0.0.1', () => process.stdout.write(`http://127.0.0.1:${server.address().port}\n`));
process.on('SIGTERM', () => server.close(() => process.exit(0)));
