/**
 * The front on the raw connection (src/keyserver/http/fetch-front.ts): on
 * real servers over loopback, what it takes it answers with node:http's bytes
 * (compared with a server running the Koa app alone), in order on a kept-alive
 * and a pipelined connection; what it does not take reaches node:http whole
 * (its 'request' event counts each one), including requests a smuggler would
 * send; the keep-alive and headers deadlines and server.close() hold.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync } from 'node:fs';
import { connect } from 'node:net';
import { join } from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { MORE, parseFrontRequest } from '../../src/keyserver/http/fetch-front.js';
import { generateShareCode } from '../../src/keyserver/share-code.js';
import { encodeShareRequest } from '../../src/keyserver/wire/messages.js';
import { exchange, post, seed, start, status, usual, type Server } from './fast-harness.js';
import { startServerProcess, waitFor, LIMITS_OFF } from './cluster.js';
import { BINARY, JSON_TYPE, ManualClock, tempDir } from './harness.js';
import { issueCert, makeCa } from './test-pki.js';
import { needFacility } from '../helpers/facility.js';

/** `p`, or a failure naming `what` after `ms`. */
async function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: not within ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([p, late]);
  } finally {
    clearTimeout(timer);
  }
}

/** A JSON fetch as a browser-side or scripted client sends it, kept alive. */
const jsonFetch = (code: string, extra: Record<string, string> = {}): string => {
  const body = JSON.stringify({ op: 'fetch', code });
  const lines = Object.entries({
    Host: 'x',
    'Content-Type': JSON_TYPE,
    'Content-Length': String(body.length),
    ...extra,
  })
    .map(([k, v]) => `${k}: ${v}\r\n`)
    .join('');
  return `POST /v1/share HTTP/1.1\r\n${lines}\r\n${body}`;
};

interface Pair {
  fast: Server;
  koa: Server;
  live: string;
  other: string;
  pending: string;
  /** How many requests have reached node:http's 'request' event on the fast server. */
  handed: () => number;
}

async function pair(clock: ManualClock, timeouts = {}): Promise<Pair> {
  const fast = await start(clock, true, { rateLimitPerMinute: 0 }, undefined, 5, timeouts);
  const koa = await start(clock, false, { rateLimitPerMinute: 0 }, undefined, 5, timeouts);
  const live = generateShareCode(0, 0).display;
  const other = generateShareCode(0, 0).display;
  const pending = generateShareCode(0, 0).display;
  for (const s of [fast, koa]) {
    await seed(s, live.replace(/-/g, ''), 'a@example.org', clock.now(), 3_600_000);
    await seed(s, other.replace(/-/g, ''), 'b@example.org', clock.now(), 3_600_000);
    await seed(s, pending.replace(/-/g, ''), 'c@example.org', clock.now(), 3_600_000, true);
  }
  let n = 0;
  fast.running.server.on('request', () => n++);
  return { fast, koa, live, other, pending, handed: () => n };
}

async function stopAll(p: Pair): Promise<void> {
  await p.fast.stop();
  await p.koa.stop();
}

/** The same pieces on one connection to each server: the same answers; how many reached node:http on the fast one. */
async function sameOnOneConnection(p: Pair, pieces: string[], count: number, what: string): Promise<number> {
  const before = p.handed();
  const a = await exchange(p.fast.running.url, pieces, count);
  const b = await exchange(p.koa.running.url, pieces, count);
  a.socket.destroy();
  b.socket.destroy();
  assert.is(a.answers.length, count, `${what}: ${count} answers from the front`);
  assert.equal(a.answers, b.answers, `${what}: the same bytes as node:http and Koa`);
  return p.handed() - before;
}

test('usual fetches on one kept-alive connection: taken by the front, the same bytes as node:http sends', async () => {
  const clock = new ManualClock(Date.now());
  const p = await pair(clock);
  try {
    const unknown = generateShareCode(0, 0).display;
    const pieces = [
      usual(p.live),
      usual(unknown),
      usual(p.other, { Accept: JSON_TYPE, 'User-Agent': 'wrk' }),
      usual(p.pending, { Connection: 'keep-alive' }),
      usual(p.live.toLowerCase(), { Accept: 'text/html' }),
      jsonFetch(p.other),
      jsonFetch(unknown, { Accept: BINARY }),
      usual(`${p.live.slice(0, -1)}${p.live.endsWith('0') ? '1' : '0'}`), // a typo: 400, and the connection closes
    ];
    const handed = await sameOnOneConnection(p, pieces, pieces.length, 'kept alive');
    assert.is(handed, 0, 'none of them went through node:http');
    const { answers } = await exchange(p.fast.running.url, pieces, pieces.length);
    assert.equal(
      answers.map(status),
      [200, 404, 200, 409, 200, 200, 404, 400],
      'found, unknown, found (JSON), pending, found, found (JSON body), unknown (JSON body), typo',
    );
    assert.match(answers[0]!, /\r\nConnection: keep-alive\r\nKeep-Alive: timeout=5\r\n\r\n/);
    assert.match(answers[7]!, /\r\nConnection: close\r\n/);
  } finally {
    await stopAll(p);
  }
});

test('pipelined requests: answered in order; from the first one it does not take, node:http has the connection', async () => {
  const clock = new ManualClock(Date.now());
  const p = await pair(clock);
  try {
    const health = 'GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n';
    const all = [usual(p.live), usual(p.other), health, usual(p.live), usual(p.other, { Connection: 'close' })].join(
      '',
    );
    const handed = await sameOnOneConnection(p, [all], 5, 'pipelined');
    assert.is(handed, 3, 'the two fetches before GET were the front’s; GET and what followed went to node:http');
    // The same with the request node:http must take arriving in two pieces after two taken ones.
    const split = usual(p.live, { 'X-Anything': 'y' });
    const cut = split.length - 3;
    const pieces = [usual(p.live) + usual(p.other) + split.slice(0, cut), split.slice(cut)];
    assert.is(await sameOnOneConnection(p, pieces, 3, 'split after two'), 1);
    // A usual fetch whose body, or head, comes in a second read: the front waits for it and takes it.
    const one = usual(p.live);
    assert.is(await sameOnOneConnection(p, [one.slice(0, -4), one.slice(-4)], 1, 'body later'), 0);
    assert.is(await sameOnOneConnection(p, [one.slice(0, 30), one.slice(30)], 1, 'head later'), 0);
    // One that turns out to be another request once the rest has come: node:http has it whole.
    const other = usual(p.live, { 'X-Anything': 'y' });
    assert.is(await sameOnOneConnection(p, [other.slice(0, 30), other.slice(30)], 1, 'another, later'), 1);
  } finally {
    await stopAll(p);
  }
});

test('what the front does not take reaches node:http whole: smuggling forms, other headers, other requests', async () => {
  const clock = new ManualClock(Date.now());
  const p = await pair(clock);
  try {
    const body = encodeShareRequest({ op: 'fetch', code: p.live }).toString('latin1');
    const n = body.length;
    const head = (lines: string) => `POST /v1/share HTTP/1.1\r\n${lines}\r\n${body}`;
    const cases: Array<[string, string]> = [
      [
        'Transfer-Encoding beside Content-Length',
        head(`Host: x\r\nContent-Type: ${BINARY}\r\nContent-Length: ${n}\r\nTransfer-Encoding: chunked\r\n`),
      ],
      [
        'two Content-Lengths',
        head(`Host: x\r\nContent-Type: ${BINARY}\r\nContent-Length: ${n}\r\nContent-Length: ${n}\r\n`),
      ],
      [
        'a folded header',
        head(`Host: x\r\nContent-Type: ${BINARY}\r\nContent-Length: ${n}\r\nUser-Agent: a\r\n b\r\n`),
      ],
      ['a space before the colon', head(`Host: x\r\nContent-Type: ${BINARY}\r\nContent-Length : ${n}\r\n`)],
      ['a signed Content-Length', head(`Host: x\r\nContent-Type: ${BINARY}\r\nContent-Length: +${n}\r\n`)],
      ['no Host', head(`Content-Type: ${BINARY}\r\nContent-Length: ${n}\r\n`)],
      [
        'a forwarded fetch',
        head(`Host: x\r\nContent-Type: ${BINARY}\r\nContent-Length: ${n}\r\nX-Stash-Forwarded-By: 3\r\n`),
      ],
      ['a media type with parameters', head(`Host: x\r\nContent-Type: ${BINARY}; q=1\r\nContent-Length: ${n}\r\n`)],
      [
        'Connection: upgrade',
        head(`Host: x\r\nContent-Type: ${BINARY}\r\nContent-Length: ${n}\r\nConnection: upgrade\r\n`),
      ],
      [
        'a bare LF in a value',
        head(`Host: x\r\nContent-Type: ${BINARY}\r\nContent-Length: ${n}\r\nUser-Agent: a\nb\r\n`),
      ],
      [
        'HTTP/1.0',
        head(`Host: x\r\nContent-Type: ${BINARY}\r\nContent-Length: ${n}\r\n`).replace('HTTP/1.1', 'HTTP/1.0'),
      ],
      [
        'a JSON publish',
        post(JSON.stringify({ op: 'create', public_key: 'x', email: 'a@b' }), { 'Content-Type': JSON_TYPE }),
      ],
      ['a JSON fetch with a charset', jsonFetch(p.live, { 'Content-Type': `${JSON_TYPE}; charset=utf-8` })],
      [
        'a trailing byte after the body, counted',
        `${head(`Host: x\r\nContent-Type: ${BINARY}\r\nContent-Length: ${n + 1}\r\n`)}x`,
      ],
    ];
    // Each followed by a request that closes: node:http answers up to it, or refuses the first and closes.
    const last = 'GET /v1/health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n';
    for (const [what, bytes] of cases) {
      const before = p.handed();
      const a = await exchange(p.fast.running.url, [bytes + last], Number.POSITIVE_INFINITY);
      const b = await exchange(p.koa.running.url, [bytes + last], Number.POSITIVE_INFINITY);
      assert.ok(a.answers.length > 0, `${what}: answered`);
      assert.equal(a.answers, b.answers, `${what}: the same bytes as node:http and Koa`);
      // Reached node:http's request event, or refused by its parser (a 400 of node:http's own: no header of the app's).
      const refused = status(a.answers[0]!) === 400 && !a.answers[0]!.includes('X-Content-Type-Options');
      assert.ok(
        p.handed() - before === 2 || refused,
        `${what}: it and the next request went to node:http (${p.handed() - before})`,
      );
      if (refused)
        assert.not.ok(
          a.answers.some((x) => x.includes('X-Content-Type-Options')),
          `${what}: refused, and nothing after it answered`,
        );
    }
  } finally {
    await stopAll(p);
  }
});

test('parseFrontRequest takes only the usual fetch and never throws on damaged bytes', () => {
  const good = usual(generateShareCode(0, 0).display);
  const taken1 = (r: ReturnType<typeof parseFrontRequest>) => (typeof r === 'object' ? r : undefined);
  const parsed = taken1(parseFrontRequest(Buffer.from(good, 'latin1'), 0));
  assert.ok(parsed, 'the usual request is taken');
  assert.is(parsed!.end, good.length);
  assert.is(taken1(parseFrontRequest(Buffer.from(`xx${good}`, 'latin1'), 2))?.end, good.length + 2, 'at an offset');
  // A head parsed once is known again by its bytes; one byte changed and it is read anew.
  assert.is(parseFrontRequest(Buffer.from(good.replace('Host:', 'Hosx:'), 'latin1'), 0), undefined, 'another header');
  assert.is(
    parseFrontRequest(Buffer.from(good.replace('Host: x', 'Host:\x01x'), 'latin1'), 0),
    undefined,
    'a control byte',
  );
  assert.ok(taken1(parseFrontRequest(Buffer.from(good, 'latin1'), 0)), 'the usual one again');
  let taken = 0;
  let seed = 7;
  const rnd = () => {
    seed = (seed * 1103515245 + 12345) & 0x7fffffff;
    return seed;
  };
  for (let i = 0; i < 5000; i++) {
    const b = Buffer.from(good, 'latin1');
    for (let k = 1 + (rnd() % 3); k > 0; k--) b[rnd() % b.length] = rnd() % 256;
    const r = parseFrontRequest(b, 0);
    if (r === undefined) continue;
    if (r === MORE) {
      // Waiting for more only for a request that says it is longer (a Content-Length grown by the damage).
      assert.ok(b.toString('latin1').startsWith('POST /v1/share HTTP/1.1\r\n'));
      continue;
    }
    taken++;
    // Whatever it takes is still a request it would take whole: the same line, the headers it knows, a body to its length.
    assert.ok(b.toString('latin1').startsWith('POST /v1/share HTTP/1.1\r\n'));
    assert.is(r.end, b.length, 'the body ends where the bytes do');
    assert.ok(/^[\x21-\x7e]+$/.test(r.code));
  }
  assert.ok(taken < 5000, 'damaged requests are refused');
  // Every start of it is one to wait on; every start of another request is not.
  for (let cut = 0; cut < good.length; cut++)
    assert.is(parseFrontRequest(Buffer.from(good.slice(0, cut), 'latin1'), 0), MORE, `cut at ${cut}`);
  for (const other of ['GET ', 'POST /v1/shares', 'POST /v1/share HTTP/1.0', 'PUT /v1/share HTTP/1.1\r\n'])
    assert.is(parseFrontRequest(Buffer.from(other, 'latin1'), 0), undefined, other);
  const endless = Buffer.from(`POST /v1/share HTTP/1.1\r\nUser-Agent: ${'a'.repeat(9000)}`, 'latin1');
  assert.is(parseFrontRequest(endless, 0), undefined, 'a head past 8 KiB is not waited on');
});

test('deadlines: a silent connection and a cut head get 408 at the headers deadline, a cut body node:http, an idle connection closes', async () => {
  const clock = new ManualClock(Date.now());
  const p = await pair(clock, { keepAliveMs: 300, headersMs: 400, checkIntervalMs: 100, requestMs: 1000 });
  try {
    const one = usual(p.live);
    const cutHead = one.slice(0, 40);
    const cutBody = one.slice(0, -3);
    // The same on both servers: node:http answers 408 to a silent connection and to a head not whole by
    // its deadline; a whole head whose body does not come gets the app's 408 at the body deadline.
    for (const [what, pieces] of [
      ['silent', [] as string[]],
      ['a cut head', [cutHead]],
      ['a cut body', [cutBody]],
    ] as const) {
      const a = await within(exchange(p.fast.running.url, [...pieces], Number.POSITIVE_INFINITY), 5_000, what);
      const b = await within(exchange(p.koa.running.url, [...pieces], Number.POSITIVE_INFINITY), 5_000, what);
      assert.equal(a.answers.map(status), [408], `${what}: 408 (${JSON.stringify(a.answers)})`);
      assert.equal(
        a.answers.map((x) => x.replace(/\r\nDate: -/, '')),
        b.answers.map((x) => x.replace(/\r\nDate: -/, '')),
        `${what}: node:http's bytes`,
      );
    }
    const { answers, closed } = await exchange(p.fast.running.url, [one], 1);
    assert.is(status(answers[0]!), 200);
    assert.match(answers[0]!, /\r\nKeep-Alive: timeout=0\r\n/, "node:http's rounding of 300 ms");
    await within(closed, 5_000, 'the idle connection closed');
  } finally {
    await stopAll(p);
  }
});

test('after an answer with Connection: close: a reset does not crash the server, a half-open client does not hold close()', async () => {
  const clock = new ManualClock(Date.now());
  const p = await pair(clock);
  try {
    const { hostname, port } = new URL(p.fast.running.url);
    // A client that resets the moment its answer comes (the server's socket then has nobody of node:http's listening).
    for (let i = 0; i < 5; i++) {
      const socket = connect(Number(port), hostname);
      await once(socket, 'connect');
      socket.on('error', () => {});
      socket.write(usual(p.live, { Connection: 'close' }));
      await once(socket, 'data');
      socket.resetAndDestroy();
    }
    await new Promise((r) => setTimeout(r, 200));
    const after = await exchange(p.fast.running.url, [usual(p.live)], 1);
    after.socket.destroy();
    assert.is(status(after.answers[0]!), 200, 'still serving');
    // A client that never closes its side: the server's side closes all the same.
    const half = connect({ port: Number(port), host: hostname, allowHalfOpen: true });
    await once(half, 'connect');
    half.write(usual(p.live, { Connection: 'close' }));
    half.resume();
    await within(once(half, 'end'), 5_000, 'the answer and the end');
    await within(p.fast.running.close(), 5_000, 'server.close() with a half-open client');
    half.destroy();
  } finally {
    await p.koa.stop();
    await p.fast.stop().catch(() => {});
  }
});

test('server.close() ends connections the front holds between requests at once', async () => {
  const clock = new ManualClock(Date.now());
  const p = await pair(clock, { keepAliveMs: 600_000 });
  try {
    const { answers, closed } = await exchange(p.fast.running.url, [usual(p.live)], 1);
    assert.is(status(answers[0]!), 200);
    const stopped = p.fast.running.close();
    await within(closed, 5_000, 'the held connection closed by server.close()');
    await within(stopped, 5_000, 'server.close() done');
  } finally {
    await p.koa.stop();
  }
});

test('a client that pipelines 20,000 fetches and reads late gets every answer, in order (the front waits for drain)', async () => {
  if (
    !needFacility(
      existsSync('/usr/bin/python3'),
      'python3',
      'a client with a small receive buffer (SO_RCVBUF) is a Python one',
    )
  )
    return;
  const clock = new ManualClock(Date.now());
  const fast = await start(clock, true, { rateLimitPerMinute: 0 });
  try {
    const live = generateShareCode(0, 0).display;
    const unknown = generateShareCode(0, 0).display;
    await seed(fast, live.replace(/-/g, ''), 'a@example.org', clock.now(), 3_600_000);
    const n = 20_000;
    // Large answers (a browser's 404 page) beside small ones: megabytes the client does not read for a while.
    const one = usual(live) + usual(unknown, { Accept: 'text/html' });
    const { port } = new URL(fast.running.url);
    // A 4 KiB receive buffer and no reading for 1 s: the server's socket buffer fills and its writes wait.
    const client = `
import socket, sys, threading, time
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
s.connect(("127.0.0.1", ${Number(port)}))
data = sys.stdin.buffer.read()
threading.Thread(target=lambda: s.sendall(data), daemon=True).start()
time.sleep(1)
got, statuses = b"", []
while len(statuses) < ${n}:
    chunk = s.recv(65536)
    if not chunk: break
    got += chunk
    while True:
        end = got.find(b"\\r\\n\\r\\n")
        if end < 0: break
        head = got[:end].decode("latin1")
        length = int([l.split(":")[1] for l in head.split("\\r\\n") if l.lower().startswith("content-length:")][0])
        if len(got) < end + 4 + length: break
        statuses.append(head.split(" ")[1])
        got = got[end + 4 + length:]
print(" ".join(statuses))
`;
    const py = spawn('/usr/bin/python3', ['-c', client], { stdio: ['pipe', 'pipe', 'inherit'] });
    py.stdin.end(Buffer.from(one.repeat(n / 2), 'latin1'));
    let out = '';
    py.stdout.on('data', (d: Buffer) => {
      out += d.toString();
    });
    await within(once(py, 'exit'), 60_000, `${n} answers read`);
    const statuses = out.trim().split(' ');
    assert.is(statuses.length, n);
    assert.ok(
      statuses.every((st, i) => st === (i % 2 === 0 ? '200' : '404')),
      'found, unknown, found, ... in request order',
    );
  } finally {
    await fast.stop();
  }
});

test('over HTTPS with --processes 2: HSTS as node:http writes it, a later answer (asked of the store process) kept in order, in both processes', async () => {
  const dir = tempDir('front-tls');
  const ca = makeCa(dir.path);
  const cert = issueCert(ca);
  const server = await startServerProcess([
    '--bind',
    '127.0.0.1:0',
    '--state-dir',
    join(dir.path, 'state'),
    '--tls-cert',
    cert.certPath,
    '--tls-key',
    cert.keyPath,
    '--processes',
    '2',
    '--developer',
    ...LIMITS_OFF,
  ]);
  try {
    assert.ok(server.url.startsWith('https://'), server.url);
    await waitFor('the fetch process', () => /fetch process 1 started/.test(server.stderr()), 20_000);
    const unknown = generateShareCode(0, 0).display;
    const status = 'GET /v1/status HTTP/1.1\r\nHost: x\r\n\r\n';
    // Connections alternate between the store's process and the fetch process: four cover both twice.
    for (let i = 0; i < 4; i++) {
      const taken = usual(unknown);
      const handed = usual(unknown, { 'X-Anything': 'y' }); // the same fetch, answered by node:http
      const { answers, socket } = await exchange(server.url, [taken + taken + status + handed], 4, ca.pem);
      socket.destroy();
      assert.equal(
        answers.map((a) => Number(a.split(' ')[1])),
        [404, 404, 200, 404],
        `connection ${i}: ${JSON.stringify(answers)}\n${server.stderr()}`,
      );
      assert.match(answers[0]!, /^HTTP\/1\.1 404 Not Found\r\n.*\r\nStrict-Transport-Security: [^\r]*\r\nDate: /s);
      assert.is(answers[0], answers[3], `connection ${i}: the front's bytes are node:http's`);
    }
  } finally {
    await server.stop();
    dir.remove();
  }
});

test.run();
