/**
 * The two paths a fetch takes: the front on the raw connection
 * (src/keyserver/http/fetch-front.ts) against the Koa app alone. Two real
 * servers with the same shares and the same clock, one with the front and one
 * without, get the same requests; their answers must be the same bytes
 * (status line, headers in order, body; only Date differs), whether the front
 * answers a request or hands it to the app.
 */
import { randomBytes } from 'node:crypto';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { generateShareCode } from '../../src/keyserver/share-code.js';
import { readStateReadOnly } from '../../src/keyserver/store/read-only.js';
import { PEEK_EXPIRES_AT, PEEK_SIZE, PEEK_STAMP_SEQ, PEEK_VERIFIED_AT } from '../../src/keyserver/store/share-table.js';
import { FetchedCache } from '../../src/keyserver/wire/fetched-cache.js';
import { shareResponseJson } from '../../src/keyserver/wire/json.js';
import {
  decodeShareResponse,
  encodeShareRequest,
  encodeShareResponse,
  type FetchedResponse,
} from '../../src/keyserver/wire/messages.js';
import { arrayBuffersKeptSince, arrayBuffersNow, lonePooledCopy } from './kept-memory.js';
import {
  exchange,
  fetchBin,
  fetchJson,
  key,
  post,
  raw,
  same,
  seed,
  start,
  status,
  type Server,
} from './fast-harness.js';
import { BINARY, JSON_TYPE, ManualClock, tempDir } from './harness.js';

test('the front and Koa answer every fetch, error and fallback with the same bytes', async () => {
  const clock = new ManualClock(Date.now());
  const fast = await start(clock, true, { rateLimitPerMinute: 0 });
  const koa = await start(clock, false, { rateLimitPerMinute: 0 });
  try {
    const now = clock.now();
    const live = generateShareCode(0, 0);
    const pending = generateShareCode(0, 0);
    const soon = generateShareCode(0, 0);
    const elsewhere = generateShareCode(5, 6);
    for (const s of [fast, koa]) {
      await seed(s, live.canonical, 'Zoë <zoe@example.org>'.replace(/[<> ]/g, ''), now, 3_600_000);
      await seed(s, pending.canonical, 'p@example.org', now, 3_600_000, true);
      await seed(s, soon.canonical, 's@example.org', now, 1_000);
    }
    clock.advance(2_000);
    const cases: Array<[string, string, number]> = [
      ['binary fetch', fetchBin(live.display), 200],
      ['binary fetch again (count 2)', fetchBin(live.canonical.toLowerCase()), 200],
      ['JSON fetch', fetchJson(live.display), 200],
      ['JSON fetch, binary answer asked for', fetchJson(live.display, { Accept: BINARY }), 200],
      ['binary fetch, JSON answer asked for', fetchBin(live.display, { Accept: JSON_TYPE }), 200],
      ['unknown code', fetchBin(generateShareCode(0, 0).display), 404],
      ['unknown code, JSON', fetchJson(generateShareCode(0, 0).display), 404],
      ['typo', fetchBin(`${live.display.slice(0, -1)}${live.display.endsWith('0') ? '1' : '0'}`), 400],
      ['pending', fetchJson(pending.display), 409],
      ['expired', fetchBin(soon.display), 410],
      ['owner served elsewhere', fetchBin(elsewhere.display), 421],
      [
        'forwarded by another server (the app answers it, from this store)',
        fetchBin(live.display, { 'X-Stash-Forwarded-By': '3' }),
        200,
      ],
      [
        'wrong content type',
        post(encodeShareRequest({ op: 'fetch', code: live.display }), { 'Content-Type': 'text/plain' }),
        415,
      ],
      ['oversize body', post(Buffer.alloc(5000, 1), { 'Content-Type': BINARY }), 413],
      ['garbage bytes', post(randomBytes(40), { 'Content-Type': BINARY }), 400],
      ['garbage JSON', post('{"op":"fetch","code":1}', { 'Content-Type': JSON_TYPE }), 400],
      [
        'publish with a bad key',
        post(encodeShareRequest({ op: 'create', publicKey: Buffer.alloc(65), email: 'a@example.org' }), {
          'Content-Type': BINARY,
        }),
        400,
      ],
      ['query string (Koa route)', fetchBin(live.display).replace('/v1/share', '/v1/share?x=1'), 200],
    ];
    for (const [what, bytes, expected] of cases) assert.is(status(await same(fast, koa, bytes, what)), expected, what);
    // A body that never completes: 408 from both, after the body deadline.
    const slow = fetchBin(live.display);
    const timedOut = await same(fast, koa, slow, 'slow body', slow.indexOf('\r\n\r\n') + 4 + 2);
    assert.is(status(timedOut), 408);
    assert.match(timedOut, /REQUEST_TIMEOUT/, "our own answer, not node:http's header timeout");
    // The count went on in step on both servers (7 fetches of `live` above).
    const body = (await raw(fast.running.url, fetchBin(live.display))).split('\r\n\r\n')[1]!;
    const res = decodeShareResponse(Buffer.from(body, 'latin1'), (m) => new Error(m));
    assert.is(res.type === 'fetched' && res.fetchCount, 8);
    // A publish through the front's server reaches the app, its bytes put back for node:http.
    const created = await raw(
      fast.running.url,
      post(encodeShareRequest({ op: 'create', publicKey: key, email: 'new@example.org' }), { 'Content-Type': BINARY }),
    );
    assert.is(status(created), 201, `${created.slice(0, 200)}\n${fast.logger.text()}`);
  } finally {
    await fast.stop();
    await koa.stop();
  }
});

/** A POST of `body` to `path` (no Content-Type unless given). */
function postTo(path: string, body: string, headers: Record<string, string> = {}): string {
  return post(body, headers).replace('POST /v1/share ', `POST ${path} `);
}

/** The code of a 201 answer, binary or JSON. */
function createdCode(answer: string): string {
  const body = answer.slice(answer.indexOf('\r\n\r\n') + 4);
  if (/\r\nContent-Type: application\/json/.test(answer)) return (JSON.parse(body) as { code: string }).code;
  const res = decodeShareResponse(Buffer.from(body, 'latin1'), (m) => new Error(m));
  assert.is(res.type, 'created');
  return (res as { code: string }).code;
}

test("publishes and confirmations: the front's server sends the app's bytes (share codes set aside), errors and fallbacks included", async () => {
  const clock = new ManualClock(Date.now());
  const fast = await start(clock, true, { rateLimitPerMinute: 0 });
  const koa = await start(clock, false, { rateLimitPerMinute: 0 });
  /** Each server's answer with its own code (which differs between the two stores) written as CODE. */
  const both = async (bytes: (s: Server) => string, what: string, codes?: Map<Server, string>): Promise<string[]> => {
    const answers: string[] = [];
    for (const s of [fast, koa]) {
      let a = await raw(s.running.url, bytes(s));
      const code = codes?.get(s) ?? (status(a) === 201 ? createdCode(a) : undefined);
      if (code !== undefined) {
        codes?.set(s, code);
        a = a.split(code).join('CODE').split(code.replace(/-/g, '')).join('CODE');
      }
      answers.push(a);
    }
    assert.ok(answers[0]!.startsWith('HTTP/1.1 '), `${what}: an answer`);
    assert.is(answers[0], answers[1], `${what}: same bytes from the front and from Koa`);
    return answers;
  };
  try {
    const create = (email: string, type: string, headers: Record<string, string> = {}) =>
      type === BINARY
        ? post(encodeShareRequest({ op: 'create', publicKey: key, email }), { 'Content-Type': BINARY, ...headers })
        : post(JSON.stringify({ op: 'create', public_key: key.toString('base64'), email }), {
            'Content-Type': JSON_TYPE,
            ...headers,
          });
    const codes = new Map<Server, string>();
    const [created] = await both(() => create('bin@example.org', BINARY), 'binary publish', codes);
    assert.is(status(created!), 201);
    assert.is(status((await both(() => create('json@example.org', JSON_TYPE), 'JSON publish'))[0]!), 201);
    assert.is(
      status(
        (
          await both(() => create('mixed@example.org', JSON_TYPE, { Accept: BINARY }), 'JSON publish, binary answer')
        )[0]!,
      ),
      201,
    );
    assert.is(
      status(
        (
          await both(
            () => create('bad@example.org', BINARY).replace('bad@example.org', 'bad@example.-rg'),
            'bad address',
          )
        )[0]!,
      ),
      400,
    );
    assert.is(
      status(
        (await both(() => create('html@example.org', BINARY, { Accept: 'text/html' }), 'publish from a browser'))[0]!,
      ),
      201,
    );

    // The mailed link, confirmed through each path: the page, then the page of a link already used.
    const link = (s: Server) => new URL(s.links.get('bin@example.org')!).pathname;
    for (const [what, headers] of [
      ['confirm', { 'Content-Length': '0' }],
      ['confirm again', {}],
    ] as const) {
      const req = (s: Server) =>
        `POST ${link(s)} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n${Object.entries(headers)
          .map(([k, v]) => `${k}: ${v}\r\n`)
          .join('')}\r\n`;
      const [page] = await both(req, what, codes);
      assert.is(status(page!), 200, page);
      assert.match(page!, /\r\nContent-Security-Policy: /);
    }
    assert.is(
      status(
        (await both(() => postTo('/verify/AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA', ''), 'unknown token'))[0]!,
      ),
      404,
    );
    assert.is(
      status((await both(() => postTo('/verify/%41%41', ''), 'an escaped token (the app decodes it)'))[0]!),
      404,
    );
    assert.is(
      status((await both(() => postTo('/verify/abc', 'x'.repeat(5000)), 'oversize confirmation body'))[0]!),
      413,
    );
    // The confirmed share is fetched through the front.
    const fetched = await raw(fast.running.url, fetchBin(codes.get(fast)!));
    assert.is(status(fetched), 200, fetched);
  } finally {
    await fast.stop();
    await koa.stop();
  }
});

test('rate limited publishes and confirmations: the same 429 on both paths', async () => {
  const clock = new ManualClock(Date.now());
  const config = { rateLimitPerMinute: 60, rateLimitBurst: 1 };
  const fast = await start(clock, true, config);
  const koa = await start(clock, false, config);
  try {
    const create = post(encodeShareRequest({ op: 'create', publicKey: key, email: 'limited@example.org' }), {
      'Content-Type': BINARY,
    });
    assert.is(status(await raw(fast.running.url, create)), 201);
    assert.is(status(await raw(koa.running.url, create)), 201);
    const limited = await same(fast, koa, create, 'second publish');
    assert.is(status(limited), 429);
    const page = await same(fast, koa, postTo('/verify/AAAA', '', {}), 'a confirmation past the limit');
    assert.is(status(page), 429);
    assert.match(page, /text\/html/);
  } finally {
    await fast.stop();
    await koa.stop();
  }
});

test('a fetch whose body arrives after its headers, in pieces, gets the same answer from both paths', async () => {
  const clock = new ManualClock(Date.now());
  const fast = await start(clock, true, { rateLimitPerMinute: 0 });
  const koa = await start(clock, false, { rateLimitPerMinute: 0 });
  try {
    const live = generateShareCode(0, 0);
    for (const s of [fast, koa]) await seed(s, live.canonical, 'split@example.org', clock.now(), 3_600_000);
    for (const bytes of [fetchBin(live.display), fetchJson(live.display)]) {
      // The head and 3 bytes of the body, then 2 bytes, then the rest (Connection: close ends each).
      const split = bytes.indexOf('\r\n\r\n') + 4 + 3;
      const pieces = [bytes.slice(0, split), bytes.slice(split, split + 2), bytes.slice(split + 2)];
      const answers = await Promise.all(
        [fast, koa].map(async (s) =>
          (await exchange(s.running.url, pieces, Number.POSITIVE_INFINITY)).answers.join(''),
        ),
      );
      assert.is(status(answers[0]!), 200, answers[0]!.slice(0, 200));
      assert.is(answers[0], answers[1], 'same bytes from the front and from Koa');
    }
  } finally {
    await fast.stop();
    await koa.stop();
  }
});

test('rate limited fetches: the same 429 and Retry-After on both paths, per client address with --trust-proxy', async () => {
  const clock = new ManualClock(Date.now());
  const config = { rateLimitPerMinute: 60, rateLimitBurst: 2, trustProxy: true };
  const fast = await start(clock, true, config);
  const koa = await start(clock, false, config);
  try {
    const live = generateShareCode(0, 0);
    for (const s of [fast, koa]) await seed(s, live.canonical, 'r@example.org', clock.now(), 3_600_000);
    const from = (ip: string) => fetchBin(live.display, { 'X-Forwarded-For': `203.0.113.9, ${ip}` });
    assert.is(status(await same(fast, koa, from('198.51.100.1'), '1st')), 200);
    assert.is(status(await same(fast, koa, from('198.51.100.1'), '2nd')), 200);
    const limited = await same(fast, koa, from('198.51.100.1'), '3rd');
    assert.is(status(limited), 429);
    assert.match(limited, /\r\nRetry-After: 1\r\n/);
    assert.is(
      status(await same(fast, koa, fetchJson(live.display, { 'X-Forwarded-For': '198.51.100.1' }), '4th, JSON')),
      429,
    );
    assert.is(status(await same(fast, koa, from('198.51.100.2'), 'another address')), 200);
    clock.advance(1_000);
    assert.is(status(await same(fast, koa, from('198.51.100.1'), 'a token back after a second')), 200);
  } finally {
    await fast.stop();
    await koa.stop();
  }
});

test('cached fetched answers are the bytes of the plain encoders, and follow a changed share', () => {
  const cache = new FetchedCache(2);
  const base: FetchedResponse = {
    type: 'fetched',
    code: generateShareCode(0, 0).display,
    publicKey: key,
    email: 'é@example.org',
    verifiedAt: 1_700_000_000_123,
    fetchCount: 1,
    expiresAt: 1_800_000_000_000,
  };
  const versions = [
    base,
    { ...base, fetchCount: 2 ** 32 - 1 },
    { ...base, fetchCount: 12345, email: 'other@example.org' },
    { ...base, code: generateShareCode(1, 2).display, fetchCount: 9 },
    { ...base, expiresAt: 1 },
    { ...base, verifiedAt: 5 },
    { ...base, fetchCount: 7, email: 'third@example.org' },
  ];
  for (const [i, res] of versions.entries()) {
    assert.equal(FetchedCache.encode(res, 'binary'), encodeShareResponse(res));
    assert.is(FetchedCache.encode(res, 'json').toString(), JSON.stringify(shareResponseJson(res)));
    // The cache by version: one code, a new stamp per version (the last one: a new stamp, same times: a replaced share).
    const version = new Float64Array(PEEK_SIZE);
    version[PEEK_STAMP_SEQ] = i;
    version[PEEK_EXPIRES_AT] = res.expiresAt;
    version[PEEK_VERIFIED_AT] = res.verifiedAt;
    const { fetchCount, ...facts } = res;
    for (const encoding of ['binary', 'json'] as const) {
      for (const count of [fetchCount, fetchCount + 1]) {
        const body = cache.body('CODE', version, count, encoding, () => facts);
        assert.equal(
          Buffer.from(body, 'latin1'),
          FetchedCache.encode({ ...res, fetchCount: count }, encoding),
          `version ${i}, ${encoding}, count ${count}`,
        );
      }
    }
  }
  assert.ok(cache.size <= 2, 'bounded');
});

test('a share enters the cache on its second fetch; the first is answered all the same', () => {
  const cache = new FetchedCache(16);
  const version = new Float64Array(PEEK_SIZE);
  const facts = { type: 'fetched' as const, publicKey: key, email: 'a@example.org', verifiedAt: 1, expiresAt: 2 };
  let built = 0;
  const factsOf = (code: string) => () => {
    built++;
    return { ...facts, code };
  };
  const expected = (code: string, count: number) =>
    FetchedCache.encode({ ...facts, code, fetchCount: count }, 'binary');
  for (let i = 0; i < 8; i++) {
    const body = cache.body(`ONCE${i}`, version, 1, 'binary', factsOf(`ONCE${i}`));
    assert.equal(Buffer.from(body, 'latin1'), expected(`ONCE${i}`, 1));
  }
  assert.is(cache.size, 0, 'shares fetched once are not cached');
  for (const count of [1, 2, 3, 4]) {
    const body = cache.body('HOT', version, count, 'binary', factsOf('HOT'));
    assert.equal(Buffer.from(body, 'latin1'), expected('HOT', count), `fetch ${count}`);
  }
  assert.is(cache.size, 1, 'a share fetched again is cached');
  assert.is(built, 8 + 2, 'its facts are read twice (seen, then cached), then come from the cache');
});

test('a full cache keeps no 8 KiB Buffer pool slab alive for a key it holds', async () => {
  // A share's key read from the store is a slice of node's Buffer pool; a cached entry that kept the
  // slice would keep its whole slab (8 KiB) for 65 bytes: 1,024 entries pinned about 8 MB of a
  // loaded server's memory (docs/benchmarks.md, "Memory").
  const entries = 1024;
  const cache = new FetchedCache(entries);
  const version = new Float64Array(PEEK_SIZE);
  const facts = { type: 'fetched' as const, publicKey: key, email: 'a@example.org', verifiedAt: 1, expiresAt: 2 };
  const before = arrayBuffersNow();
  for (let i = 0; i < entries; i++) {
    const code = `CODE${i}`;
    const publicKey = lonePooledCopy(key);
    // The second fetch of a share puts it in the cache (the first only marks it seen).
    for (const count of [1, 2]) cache.body(code, version, count, 'binary', () => ({ ...facts, code, publicKey }));
  }
  assert.is(cache.size, entries);
  const kept = await arrayBuffersKeptSince(before, 1024 * 1024);
  assert.ok(kept < 1024 * 1024, `the cache keeps ${kept} bytes of array buffers for ${entries} keys of 65 bytes`);
});

test('fetch counts are coalesced per share and durable after the flush window, across a restart', async () => {
  const clock = new ManualClock(Date.now());
  const dir = tempDir('fast-count');
  try {
    let s = await start(clock, true, { rateLimitPerMinute: 0 }, dir.path, 150);
    const live = generateShareCode(0, 0);
    await seed(s, live.canonical, 'c@example.org', clock.now(), 3_600_000);
    for (let i = 0; i < 20; i++) await raw(s.running.url, fetchBin(live.display));
    await new Promise((r) => setTimeout(r, 600));
    // Read from disk while the server still runs: the count is durable without a clean stop.
    const onDisk = await readStateReadOnly(dir.path, 0);
    assert.is(onDisk.index.shares.get(live.canonical)?.fetchCount, 20);
    const records = onDisk.records;
    assert.ok(
      records <= 2 + 3,
      `20 fetches within one window coalesce into a few fetch_count records (${records} records in all)`,
    );
    await s.running.close();
    s = await start(clock, true, { rateLimitPerMinute: 0 }, dir.path, 150);
    try {
      const body = (await raw(s.running.url, fetchBin(live.display))).split('\r\n\r\n')[1]!;
      const res = decodeShareResponse(Buffer.from(body, 'latin1'), (m) => new Error(m));
      assert.is(res.type === 'fetched' && res.fetchCount, 21);
    } finally {
      await s.running.close();
    }
  } finally {
    dir.remove();
  }
});

test.run();
