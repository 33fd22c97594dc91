/**
 * Deleting shares before their TTL on real servers (src/keyserver/withdraw.ts):
 * the manage link the address owner asks for by mail (GET shows, POST
 * deletes, the tombstone replicates to the peer), the JSON form of a signed
 * unpublish, and the limits, counted as publishes are.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import sodium from 'sodium-native';
import { publish, unpublish } from '../../src/keyserver/client.js';
import { parseShareCode } from '../../src/keyserver/share-code.js';
import { unpublishSignedBytes } from '../../src/keyserver/wire/unpublish-signature.js';
import { freePorts, ringConfig, waitFor } from './cluster.js';
import { http, postJson, startTestServer, type TestServer } from './harness.js';

const fast = { minBackoffMs: 50, maxBackoffMs: 300, timeoutMs: 2000 };

function identity(): { publicKey: Buffer; sign(bytes: Buffer): Buffer } {
  const xpk = Buffer.alloc(32);
  const xsk = Buffer.alloc(32);
  sodium.crypto_kx_keypair(xpk, xsk);
  const epk = Buffer.alloc(32);
  const esk = Buffer.alloc(64);
  sodium.crypto_sign_keypair(epk, esk);
  return {
    publicKey: Buffer.concat([Buffer.from([1]), xpk, epk]),
    sign: (bytes) => {
      const sig = Buffer.alloc(64);
      sodium.crypto_sign_detached(sig, bytes, esk);
      return sig;
    },
  };
}

const form = (base: string, path: string, body: string, headers: Record<string, string> = {}) =>
  http(`${base}${path}`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/x-www-form-urlencoded', Accept: 'text/html', ...headers },
    body,
  });

const manageMails = (s: TestServer) => s.sink.mails().filter((m) => m.url.includes('/manage/'));
const state = (s: TestServer, code: string) => s.store.lookup(parseShareCode(code).canonical).state;

test('manage link: mailed only for an address with shares; GET shows and deletes nothing; POST deletes one, then the rest; the tombstones reach the peer', async () => {
  const ports = await freePorts(2);
  const [a, b] = await Promise.all(
    [0, 1].map((i) => startTestServer({ config: ringConfig(i, ports), replication: fast })),
  );
  try {
    const id = identity();
    const confirmed = (await publish(a!.url, id.publicKey, 'mia@example.org')).code;
    assert.is((await http(a!.sink.lastLink('mia@example.org'), { method: 'POST' })).status, 200);
    const pending = (await publish(a!.url, id.publicKey, 'mia@example.org')).code;
    await waitFor('B holds both shares', () => state(b!, confirmed) === 'live' && state(b!, pending) === 'pending');

    // Asked of B (not the owner of the codes), for the address spelt otherwise: B holds them, B mails.
    const asked = await form(b!.url, '/manage', 'email=mia%40EXAMPLE.org');
    assert.is(asked.status, 200);
    assert.match(asked.text, /id="requested"/);
    assert.match(asked.text, /m\*\*\*@example\.org/);
    await waitFor('the manage link is mailed', () => manageMails(b!).length === 1);
    const link = manageMails(b!)[0]!;
    assert.is(link.email, 'mia@example.org', 'the domain as stored: lower case');
    assert.match(link.url, new RegExp(`^${b!.url}/manage/[A-Za-z0-9_-]{43}$`));
    assert.match(
      readFileSync(join(b!.sink.dir, 'env.txt'), 'utf8'),
      /^STASH_MAIL_KIND=manage$/m,
      'the mail command is told which link it sends',
    );

    // An address without shares gets the same answer, and no mail.
    const nobody = await form(b!.url, '/manage', 'email=nobody%40example.org');
    assert.is(nobody.status, 200);
    assert.is(
      nobody.text.replace(/n\*\*\*@/, 'm***@'),
      asked.text,
      'the answer does not tell whether the address has shares',
    );
    await new Promise((r) => setTimeout(r, 300));
    assert.is(manageMails(b!).length, 1);

    // GET shows both and changes nothing (mail scanners open links).
    const page = await http(link.url);
    assert.is(page.status, 200);
    assert.ok(page.text.includes(confirmed) && page.text.includes(pending), page.text);
    assert.match(page.text, /waiting for the address to be confirmed/);
    assert.is(
      page.headers['content-security-policy'],
      "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    );
    assert.is((await postJson(a!.url, { op: 'fetch', code: confirmed })).status, 200);

    // POST with a code deletes that one; the tombstone travels B -> A.
    const one = await form(b!.url, new URL(link.url).pathname, `code=${encodeURIComponent(confirmed.toLowerCase())}`);
    assert.is(one.status, 200);
    assert.match(one.text, new RegExp(`id="deleted">Deleted: <code>${confirmed}</code>`));
    assert.ok(one.text.includes(pending), 'the other share is still listed');
    await waitFor('A has the tombstone', () => state(a!, confirmed) === 'expired');
    const fetched = await postJson(a!.url, { op: 'fetch', code: confirmed });
    assert.is(fetched.status, 410);
    const tomb = a!.store
      .allEvents()
      .find((e) => e.type === 'tombstone' && e.code === parseShareCode(confirmed).canonical);
    assert.is(tomb?.type === 'tombstone' && tomb.reason, 'deleted');

    // POST without a code deletes the rest; a mistyped code is refused, not taken for "all".
    const typo = await form(b!.url, new URL(link.url).pathname, 'code=00-0000');
    assert.is(typo.status, 400);
    assert.match(typo.headers['content-type'] ?? '', /text\/html/);
    const rest = await form(b!.url, new URL(link.url).pathname, '');
    assert.match(rest.text, /id="none"/);
    await waitFor('A has the second tombstone', () => state(a!, pending) === 'expired');

    // Unknown and malformed tokens: the "not valid" page.
    for (const path of [`/manage/${randomBytes(32).toString('base64url')}`, '/manage/short']) {
      const bad = await http(`${b!.url}${path}`);
      assert.is(bad.status, 404);
      assert.match(bad.text, /This manage link is unknown or has expired/);
    }
    assert.is((await http(`${b!.url}/manage`)).status, 200, 'the form that asks for an address');
    assert.not.match(
      a!.logger.text() + b!.logger.text(),
      new RegExp(new URL(link.url).pathname.split('/')[2]!),
      'the token is never logged',
    );
  } finally {
    await Promise.all([a!.stop(), b!.stop()]);
  }
});

test('unpublish in JSON (curl): ISO timestamp and base64 fields; the answer names the code and the time', async () => {
  const s = await startTestServer({
    config: { rateLimitPerMinute: 0, verificationEmailRateLimitPerHour: 0, verificationEmailIpRateLimitPerHour: 0 },
  });
  try {
    const id = identity();
    const code = (await publish(s.url, id.publicKey, 'json@example.org')).code;
    const timestamp = Date.now();
    const nonce = randomBytes(16);
    const signature = id.sign(unpublishSignedBytes(parseShareCode(code).canonical, timestamp, nonce));
    const res = await postJson(s.url, {
      op: 'unpublish',
      code: code.toLowerCase(),
      timestamp: new Date(timestamp).toISOString(),
      nonce: nonce.toString('base64'),
      signature: signature.toString('base64'),
    });
    assert.is(res.status, 200, res.text);
    assert.is(res.json().type, 'unpublished');
    assert.is(res.json().code, code, 'a pending share can be unpublished too; the code comes back in display form');
    assert.ok(Math.abs(Date.parse(res.json().deleted_at) - Date.now()) < 60_000);
    assert.is(state(s, code), 'expired');
  } finally {
    await s.stop();
  }
});

test('limits as for publishes: manage mails per mailbox (429 emails-per-address); unpublishes per source IP (429 unpublishes-per-ip)', async () => {
  const s = await startTestServer({
    config: { rateLimitPerMinute: 0, verificationEmailRateLimitPerHour: 2, verificationEmailIpRateLimitPerHour: 3 },
  });
  try {
    const id = identity();
    const code = (await publish(s.url, id.publicKey, 'lim@example.org')).code;
    assert.is((await form(s.url, '/manage', 'email=lim%40example.org')).status, 200);
    const again = await form(s.url, '/manage', 'email=lim%2Bother%40example.org');
    assert.is(again.status, 429, "the publish and the first manage mail used the mailbox's two");
    assert.ok(Number(again.headers['retry-after']) > 0);
    assert.match(again.text, /too many emails for this address/);

    const other = identity();
    for (let i = 0; i < 3; i++) {
      const err = await unpublish(s.url, code, other.sign).catch((e: unknown) => e as { code?: string });
      assert.is((err as { code?: string }).code, 'UNPUBLISH_FORBIDDEN', `attempt ${i + 1}`);
    }
    const limited = await unpublish(s.url, code, id.sign).catch(
      (e: unknown) => e as { code?: string; limit?: string; retryAfter?: number },
    );
    assert.is((limited as { code?: string }).code, 'RATE_LIMITED');
    assert.is((limited as { limit?: string }).limit, 'unpublishes-per-ip');
    assert.is(state(s, code), 'pending', 'nothing was deleted past the limit');
  } finally {
    await s.stop();
  }
});

test.run();
