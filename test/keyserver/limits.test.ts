import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { fetchShare, publish } from '../../src/keyserver/client.js';
import { RequestLimiter } from '../../src/keyserver/limits/token-bucket.js';
import { WindowLimiter } from '../../src/keyserver/limits/window-limiter.js';
import { addressKey } from '../../src/keyserver/http/client-address.js';
import { ManualClock, http, identityPublicKey, postJson, startTestServer } from './harness.js';
import { generateShareCode } from '../../src/keyserver/share-code.js';

const key = identityPublicKey();
const status = (base: string, headers: Record<string, string> = {}) =>
  http(`${base}/v1/status`, { headers: { Accept: 'application/json', ...headers } });
const create = (base: string, email: string, headers: Record<string, string> = {}) =>
  postJson(base, { op: 'create', public_key: key.toString('base64'), email }, '/v1/share', headers);

test('120 requests per minute per IP with a burst of 40: the 41st gets 429 + Retry-After, then recovers', async () => {
  const clock = new ManualClock(Date.now());
  const s = await startTestServer({ clock });
  try {
    for (let i = 0; i < 40; i++) assert.is((await status(s.url)).status, 200, `request ${i + 1}`);
    const limited = await status(s.url);
    assert.is(limited.status, 429);
    assert.is(limited.headers['retry-after'], '1', '2 tokens per second: one is back within a second');
    const err = limited.json().error;
    assert.is(err.code, 'RATE_LIMITED');
    assert.is(err.limit, 'requests-per-ip');
    assert.match(err.message, /too many requests from your address \(limit: 120 per minute, burst 40\)/);
    assert.is(err.retry_after, 1);
    // The binary form carries the same.
    const bin = await http(`${s.url}/v1/topology`);
    assert.is(bin.status, 429);
    clock.advance(500);
    assert.is((await status(s.url)).status, 200, 'one token after half a second');
    assert.is((await status(s.url)).status, 429);
    clock.advance(20_000);
    for (let i = 0; i < 40; i++) assert.is((await status(s.url)).status, 200, 'full burst again after 20 s');
    assert.is((await status(s.url)).status, 429);
    // The verification page is counted too, and answers in HTML.
    const page = await http(`${s.url}/verify/${'A'.repeat(43)}`);
    assert.is(page.status, 429);
    assert.match(page.text, /Too many requests/);
  } finally {
    await s.stop();
  }
});

test('X-Forwarded-For is ignored unless --trust-proxy; with it, each client has its own bucket', async () => {
  const clock = new ManualClock(Date.now());
  const plain = await startTestServer({ clock, config: { rateLimitBurst: 3 } });
  try {
    for (let i = 0; i < 3; i++) assert.is((await status(plain.url, { 'X-Forwarded-For': `10.0.0.${i}` })).status, 200);
    assert.is(
      (await status(plain.url, { 'X-Forwarded-For': '10.0.0.99' })).status,
      429,
      'forged header does not escape the limit',
    );
  } finally {
    await plain.stop();
  }
  const proxied = await startTestServer({ clock, config: { rateLimitBurst: 3, trustProxy: true } });
  try {
    for (let i = 0; i < 3; i++)
      assert.is((await status(proxied.url, { 'X-Forwarded-For': '203.0.113.7' })).status, 200);
    assert.is((await status(proxied.url, { 'X-Forwarded-For': '203.0.113.7' })).status, 429);
    assert.is((await status(proxied.url, { 'X-Forwarded-For': '203.0.113.8' })).status, 200, 'another client');
    // Only the last entry (added by our proxy) counts: a client-chosen first entry changes nothing.
    assert.is((await status(proxied.url, { 'X-Forwarded-For': '1.2.3.4, 203.0.113.7' })).status, 429);
    // IPv6 clients are counted per /64.
    for (let i = 0; i < 3; i++)
      assert.is((await status(proxied.url, { 'X-Forwarded-For': `2001:db8:1:2::${i + 1}` })).status, 200);
    assert.is((await status(proxied.url, { 'X-Forwarded-For': '2001:db8:1:2:ffff::9' })).status, 429);
  } finally {
    await proxied.stop();
  }
});

test('a fetch that finds no share to hand out (pending, unknown, expired) costs 5 request tokens; a found share costs one; both paths agree', async () => {
  const clock = new ManualClock(Date.now()); // no refill while the test runs
  const s = await startTestServer({ clock, config: { trustProxy: true } });
  try {
    const from = (ip: string) => ({ 'X-Forwarded-For': ip });
    const pending = (await create(s.url, 'pat@example.org', from('203.0.113.1'))).json().code;
    const live = (await create(s.url, 'liv@example.org', from('203.0.113.1'))).json().code;
    await http(s.sink.lastLink('liv@example.org'), { method: 'POST' });
    const until429 = async (code: string, ip: string, json = true) => {
      const answers: number[] = [];
      for (let i = 0; i < 60; i++) {
        const res = json
          ? await postJson(s.url, { op: 'fetch', code }, '/v1/share', from(ip))
          : await postJson(s.url, { op: 'fetch', code }, '/v1/share', {
              ...from(ip),
              'Content-Type': 'application/json; charset=utf-8',
            });
        answers.push(res.status);
        if (res.status === 429) {
          assert.ok(Number(res.headers['retry-after']) >= 1);
          break;
        }
      }
      return answers;
    };
    const hits = await until429(live, '198.51.100.1');
    assert.equal(hits, [...Array(40).fill(200), 429], 'a burst of 40 fetches of a live share');
    const polls = await until429(pending, '198.51.100.2');
    assert.equal(polls, [...Array(8).fill(409), 429], 'polling a pending share: 8 of them in a burst of 40');
    const misses = await until429(generateShareCode(0, 0).display, '198.51.100.3');
    assert.equal(misses, [...Array(8).fill(404), 429], 'guessing: the same');
    // Content-Type with a parameter is answered by the Koa app, not the front: the same charge.
    assert.equal(await until429(pending, '198.51.100.4', false), [...Array(8).fill(409), 429]);
    clock.advance(60_000);
    assert.is(
      (await postJson(s.url, { op: 'fetch', code: live }, '/v1/share', from('198.51.100.2'))).status,
      200,
      'refilled after a minute',
    );
  } finally {
    await s.stop();
  }
});

test('guessing at the refill rate: 60 unknown-code fetches at 2 a second for 30 s get 8 + 12 = 20 answers of 404, whichever path answers', async () => {
  const clock = new ManualClock(Date.now());
  // The front takes exactly `application/json`; with a parameter the Koa app answers.
  for (const [fastFetch, type] of [
    [true, 'application/json'],
    [false, 'application/json; charset=utf-8'],
  ] as const) {
    const s = await startTestServer({ clock });
    try {
      const statuses: number[] = [];
      for (let i = 0; i < 60; i++) {
        statuses.push(
          (
            await postJson(s.url, { op: 'fetch', code: generateShareCode(0, 0).display }, '/v1/share', {
              'Content-Type': type,
            })
          ).status,
        );
        clock.advance(500);
      }
      const misses = statuses.filter((st) => st === 404).length;
      assert.is(misses + statuses.filter((st) => st === 429).length, 60);
      // 40 tokens and one more every half second: the first 10 misses (40 + 10 - 50 = 0), then one in every five.
      assert.equal(statuses.slice(0, 11), [...Array(10).fill(404), 429], `front ${fastFetch}: ${statuses.join(' ')}`);
      assert.is(misses, 20, `front ${fastFetch}: ${statuses.join(' ')}`);
    } finally {
      await s.stop();
    }
  }
});

test('a bucket goes into debt by at most the miss charge, and is paid off by the refill before the next request', () => {
  const clock = new ManualClock();
  const limiter = new RequestLimiter({ perMinute: 120, burst: 40, clock, maxDebt: 4 });
  for (let i = 0; i < 8; i++) {
    assert.ok(limiter.take('a').ok);
    limiter.charge('a', 4);
  }
  assert.equal(limiter.check('a'), { ok: false, retryAfter: 1 }, 'empty: one token back within half a second');
  clock.advance(500);
  assert.ok(limiter.take('a').ok);
  limiter.charge('a', 4);
  assert.equal(limiter.take('a'), { ok: false, retryAfter: 3 }, '4 owed: 5 tokens to wait for, 2.5 s');
  assert.equal(limiter.covered('a'), { ok: false, retryAfter: 3 });
  // Tokens spent elsewhere never take it deeper than the bound.
  limiter.debit('a', 100);
  limiter.charge('a', 100);
  clock.advance(2000);
  assert.is(limiter.take('a').ok, false, '4 owed, 4 back: not yet');
  assert.ok(limiter.covered('a').ok, 'but nothing owed any more');
  clock.advance(500);
  assert.ok(limiter.take('a').ok);
  // Without maxDebt (the default) a bucket stops at empty, as before.
  const plain = new RequestLimiter({ perMinute: 120, burst: 1, clock });
  assert.ok(plain.take('b').ok);
  plain.charge('b', 4);
  clock.advance(500);
  assert.ok(plain.take('b').ok);
});

test('--rate-limit-per-minute 0 disables the request limit', async () => {
  const s = await startTestServer({ config: { rateLimitPerMinute: 0 } });
  try {
    for (let i = 0; i < 150; i++) assert.is((await status(s.url)).status, 200);
  } finally {
    await s.stop();
  }
});

test('5 verification mails per address per hour: the 6th is refused, others are not, an hour later it works', async () => {
  const clock = new ManualClock(Date.now());
  const s = await startTestServer({ clock, config: { rateLimitPerMinute: 0 } });
  try {
    for (let i = 0; i < 5; i++) assert.is((await create(s.url, 'kim@example.org')).status, 201);
    clock.advance(10 * 60_000);
    const limited = await create(s.url, 'KIM@example.org');
    assert.is(limited.status, 429);
    assert.is(limited.headers['retry-after'], String(50 * 60), 'until the oldest mail leaves the window');
    assert.is(limited.json().error.limit, 'emails-per-address');
    assert.match(
      limited.json().error.message,
      /too many verification emails for this address \(limit: 5 per hour\); try again in 50 minutes/,
    );
    assert.is(s.sink.mails().length, 5, 'no sixth mail');
    assert.is(s.store.stats().sharesLive, 5, 'no share stored for the refused publish');
    assert.is((await create(s.url, 'lee@example.org')).status, 201, 'another address is fine');
    try {
      await publish(s.url, key, 'kim@example.org');
      assert.unreachable();
    } catch (err) {
      assert.is((err as { code?: string }).code, 'RATE_LIMITED');
      assert.is((err as { retryAfter?: number }).retryAfter, 3000);
      assert.is((err as { limit?: string }).limit, 'emails-per-address');
    }
    clock.advance(50 * 60_000);
    assert.is((await create(s.url, 'kim@example.org')).status, 201, 'recovered after the hour');
  } finally {
    await s.stop();
  }
});

test('the mail limit counts per mailbox: sub-addresses (victim+N@) and upper-case domains share the limit; the share keeps the address as given (domain in lower case)', async () => {
  const clock = new ManualClock(Date.now());
  const s = await startTestServer({ clock, config: { rateLimitPerMinute: 0 } });
  try {
    for (let i = 0; i < 5; i++) assert.is((await create(s.url, 'victim@example.org')).status, 201);
    for (let n = 1; n <= 6; n++) {
      const refused = await create(s.url, `victim+${n}@example.org`);
      assert.is(refused.status, 429, `victim+${n}@ is the same mailbox`);
      assert.ok(Number(refused.headers['retry-after']) > 0, 'Retry-After');
      assert.is(refused.json().error.limit, 'emails-per-address');
    }
    assert.is((await create(s.url, 'victim@EXAMPLE.ORG')).status, 429, 'the domain is compared in lower case');
    assert.is((await create(s.url, 'Victim+x@Example.Org')).status, 429);
    assert.is(s.sink.mails().length, 5, 'no sixth mail');
    // Another mailbox of the same domain, and the same local part elsewhere, are not affected.
    assert.is((await create(s.url, 'victim2@example.org')).status, 201);
    assert.is((await create(s.url, 'victim@example.net')).status, 201);

    const c = await create(s.url, 'Ann+Keys@Example.ORG');
    assert.is(c.status, 201);
    await http(s.sink.lastLink('Ann+Keys@example.org'), { method: 'POST' });
    const fetched = await fetchShare(s.url, c.json().code);
    assert.is(
      fetched.email,
      'Ann+Keys@example.org',
      'the share keeps the sub-address and the case of the local part (domains are stored in lower case)',
    );
    for (let i = 0; i < 4; i++) assert.is((await create(s.url, `ann+${i}@example.org`)).status, 201);
    assert.is((await create(s.url, 'ANN@example.org')).status, 429, 'one mailbox: ann');
  } finally {
    await s.stop();
  }
});

test('30 verification mails per source IP per hour', async () => {
  const clock = new ManualClock(Date.now());
  const s = await startTestServer({ clock, config: { rateLimitPerMinute: 0, trustProxy: true } });
  try {
    const from = { 'X-Forwarded-For': '198.51.100.20' };
    for (let i = 0; i < 30; i++)
      assert.is((await create(s.url, `user${i}@example.org`, from)).status, 201, `mail ${i + 1}`);
    const limited = await create(s.url, 'user30@example.org', from);
    assert.is(limited.status, 429);
    assert.is(limited.json().error.limit, 'emails-per-ip');
    assert.match(limited.json().error.message, /limit: 30 per hour per source IP/);
    assert.ok(Number(limited.headers['retry-after']) > 3500);
    assert.is(
      (await create(s.url, 'user30@example.org', { 'X-Forwarded-For': '198.51.100.21' })).status,
      201,
      'another IP',
    );
    clock.advance(3_600_000);
    assert.is((await create(s.url, 'user31@example.org', from)).status, 201, 'recovered');
  } finally {
    await s.stop();
  }
});

test('limiter memory is bounded: idle entries are purged and a flood of addresses is capped', () => {
  const clock = new ManualClock();
  const buckets = new RequestLimiter({ perMinute: 120, burst: 40, clock, maxEntries: 1000 });
  for (let i = 0; i < 20_000; i++) buckets.take(`10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`);
  assert.ok(buckets.entries <= 1000, `${buckets.entries} buckets`);
  clock.advance(20_000); // every bucket refills completely: no information left
  const before = buckets.entries;
  assert.is(buckets.purgeIdle(), before);
  assert.is(buckets.entries, 0);

  const mails = new WindowLimiter({ limit: 5, clock, maxEntries: 500 });
  for (let i = 0; i < 5000; i++) mails.record(`user${i}@example.org`);
  assert.ok(mails.entries <= 500);
  clock.advance(3_600_000);
  mails.purgeIdle();
  assert.is(mails.entries, 0);
  // The most recently used key survives a flood of new ones (LRU, not FIFO).
  for (let i = 0; i < 5; i++) mails.record('victim@example.org');
  for (let i = 0; i < 499; i++) mails.record(`flood${i}@example.org`);
  assert.is(mails.check('victim@example.org').ok, false);
});

test('client addresses: IPv4-mapped IPv6 folds to IPv4, IPv6 keys are /64 prefixes, junk is refused', () => {
  assert.equal(addressKey('::ffff:192.0.2.1'), { ip: '192.0.2.1', key: '192.0.2.1' });
  assert.equal(addressKey('2001:db8::1')?.key, '2001:db8:0:0::/64');
  assert.equal(addressKey('2001:DB8:0:0:1::1')?.key, '2001:db8:0:0::/64');
  assert.equal(addressKey('fe80::1%eth0')?.key, 'fe80:0:0:0::/64');
  assert.is(addressKey('not-an-ip'), undefined);
  assert.is(addressKey(' 198.51.100.1 ')?.key, '198.51.100.1');
});

test.run();
