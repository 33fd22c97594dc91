// The baseline of the key server scripts: a bare node:http server that reads
// the request body and answers `bytes` bytes with `status`. Prints its URL.
//   node bench/bare-server.js BYTES [STATUS]
import { createServer } from 'node:http';

const bytes = Number(process.argv[2] ?? 128);
const status = Number(process.argv[3] ?? 200);
const answer = Buffer.alloc(bytes, 0x61);
const server = createServer({ keepAliveTimeout: 5000 }, (req, res) => {
  req.on('data', () => {});
  req.on('end', () => {
    res.writeHead(status, { 'Content-Type': 'application/vnd.stash.v1+binary', 'Content-Length': answer.length });
    res.end(answer);
  });
});
server.listen(0, '127.0.0.1', () => process.stdout.write(`http://127.0.0.1:${server.address().port}\n`));
process.on('SIGTERM', () => server.close(() => process.exit(0)));
