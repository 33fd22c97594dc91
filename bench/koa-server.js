// The second baseline of the key server scripts: Koa with @koa/router and
// nothing else, reading the request body and answering `bytes` bytes, to tell
// the framework's cost from the key server's own. Prints its URL.
//   node bench/koa-server.js BYTES
import Koa from 'koa';
import Router from '@koa/router';

const bytes = Number(process.argv[2] ?? 128);
const answer = Buffer.alloc(bytes, 0x61);
const app = new Koa();
const router = new Router();
router.post('/v1/share', async (ctx) => {
  for await (const _ of ctx.req) {
    /* drain the body */
  }
  ctx.type = 'application/vnd.stash.v1+binary';
  ctx.body = answer;
});
app.use(router.routes());
const server = app.listen(0, '127.0.0.1', () => process.stdout.write(`http://127.0.0.1:${server.address().port}\n`));
server.keepAliveTimeout = 5000;
process.on('SIGTERM', () => server.close(() => process.exit(0)));
