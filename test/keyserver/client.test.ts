import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { createServer as createHttp } from 'node:http';
import { createServer as createTcp, type AddressInfo, type Server } from 'node:net';
import { join } from 'node:path';
import { fetchShare, publish, status, topology } from '../../src/keyserver/client.js';
import { identityPublicKey, startTestServer } from './harness.js';

async function code(p: Promise<unknown>): Promise<{ code: string; message: string }> {
  try {
    await p;
  } catch (err) {
    return err as { code: string; message: string };
  }
  throw new Error('expected a failure');
}

function listen(server: Server | ReturnType<typeof createHttp>): Promise<string> {
  return new Promise((r) =>
    server.listen(0, '127.0.0.1', () => r(`http://127.0.0.1:${(server.address() as AddressInfo).port}`)),
  );
}

test('nobody listening: SERVER_UNREACHABLE naming the server', async () => {
  const tcp = createTcp();
  const url = await listen(tcp);
  await new Promise((r) => tcp.close(r));
  const err = await code(topology(url));
  assert.is(err.code, 'SERVER_UNREACHABLE');
  assert.match(err.message, /cannot reach the key server at http:\/\/127\.0\.0\.1:\d+ \(ECONNREFUSED\)/);
});

test('a server that never answers: SERVER_UNREACHABLE after the timeout', async () => {
  const sockets: Array<import('node:net').Socket> = [];
  const tcp = createTcp((s) => sockets.push(s));
  const url = await listen(tcp);
  const started = Date.now();
  const err = await code(status(url, { timeoutMs: 400 }));
  assert.is(err.code, 'SERVER_UNREACHABLE');
  assert.match(err.message, /no answer .* within 0.4 seconds/);
  assert.ok(Date.now() - started < 2000);
  for (const s of sockets) s.destroy();
  await new Promise((r) => tcp.close(r));
});

test('garbage answers: SERVER_PROTOCOL, never a crash', async () => {
  let mode = 0;
  const server = createHttp((_req, res) => {
    if (mode === 0) {
      res.setHeader('Content-Type', 'application/vnd.stash.v1+binary');
      res.end(Buffer.from([1, 0x83, 200, 1, 2]));
    } else if (mode === 1) {
      res.statusCode = 502;
      res.setHeader('Content-Type', 'text/html');
      res.end('<h1>Bad gateway</h1>');
    } else if (mode === 2) {
      res.setHeader('Content-Type', 'application/vnd.stash.v1+binary');
      res.end(Buffer.alloc(200 * 1024));
    } else {
      res.setHeader('Content-Type', 'application/json');
      res.end('{}');
    }
  });
  const url = await listen(server);
  try {
    assert.match((await code(topology(url))).message, /unexpected answer from the key server: truncated topology/);
    mode = 1;
    const bad = await code(fetchShare(url, '0A-7K3M-9QXD-W2HF-Z'));
    assert.is(bad.code, 'SERVER_PROTOCOL');
    assert.match(bad.message, /HTTP 502/);
    mode = 2;
    assert.match((await code(status(url))).message, /larger than 65536 bytes/);
    mode = 3;
    assert.match((await code(status(url))).message, /content type application\/json/);
  } finally {
    await new Promise((r) => server.close(r));
  }
});

test('bad server URLs are usage errors', async () => {
  assert.is((await code(topology('keys.example.org'))).code, 'USAGE');
  assert.is((await code(topology('ftp://keys.example.org'))).code, 'USAGE');
});

test('the demo mail command confirms the link itself: publish, then fetch at once', async () => {
  const demo = join(process.cwd(), 'scripts', 'demo-mail-confirm.js');
  const s = await startTestServer({ config: { verificationEmailCommand: demo } });
  try {
    const key = identityPublicKey();
    const pub = await publish(`${s.url}/`, key, 'demo@example.org');
    assert.is(pub.verification, 'sent');
    const got = await fetchShare(s.url, pub.code);
    assert.is(got.email, 'demo@example.org');
    assert.ok(got.publicKey.equals(key));
  } finally {
    await s.stop();
  }
});

test.run();
