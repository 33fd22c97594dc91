import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { randomBytes } from 'node:crypto';
import { connect } from 'node:net';
import { encodeShareRequest } from '../../src/keyserver/wire/messages.js';
import { BINARY, http, identityPublicKey, postBinary, postJson, startTestServer, type TestServer } from './harness.js';

const key = identityPublicKey();
const validCreate = encodeShareRequest({ op: 'create', publicKey: key, email: 'garbage@example.org' });

async function alive(s: TestServer): Promise<void> {
  const res = await http(`${s.url}/v1/status`, { headers: { Accept: 'application/json' } });
  assert.is(res.status, 200, 'server still answers');
}

function errorOf(res: { status: number; json(): any }): { code: string; message: string } {
  assert.ok(res.status >= 400 && res.status < 500, `status ${res.status}`);
  return res.json().error;
}

test('300 random binary bodies: every one a 4xx with a message, never a 5xx', async () => {
  const s = await startTestServer({ config: { rateLimitPerMinute: 0 } });
  try {
    const statuses = new Map<number, number>();
    for (let i = 0; i < 300; i++) {
      const body = randomBytes(Math.floor(Math.random() * 600));
      // Half of them look like our encoding at first glance.
      if (i % 2 === 0 && body.length > 2) {
        body[0] = 1;
        body[1] = i % 4 === 0 ? 1 : 2;
      }
      const res = await postBinary(s.url, body, { Accept: 'application/json' });
      statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
      const err = errorOf(res);
      assert.ok(err.message.length > 10, err.message);
    }
    assert.not.ok(
      [...statuses.keys()].some((st) => st >= 500),
      JSON.stringify([...statuses]),
    );
    await alive(s);
  } finally {
    await s.stop();
  }
});

test('every truncation of a valid request, trailing bytes and a wrong version are refused precisely', async () => {
  const s = await startTestServer({ config: { rateLimitPerMinute: 0 } });
  try {
    for (let n = 0; n < validCreate.length; n++) {
      const res = await postBinary(s.url, validCreate.subarray(0, n), { Accept: 'application/json' });
      assert.is(res.status, 400, `prefix ${n}`);
      assert.match(errorOf(res).message, /truncated request/);
    }
    const trailing = await postBinary(s.url, Buffer.concat([validCreate, Buffer.from([0])]), {
      Accept: 'application/json',
    });
    assert.match(errorOf(trailing).message, /1 unexpected byte\(s\) after the end/);
    const wrongVersion = Buffer.from(validCreate);
    wrongVersion[0] = 2;
    assert.match(
      errorOf(await postBinary(s.url, wrongVersion, { Accept: 'application/json' })).message,
      /unsupported encoding version 2/,
    );
    const wrongType = Buffer.from(validCreate);
    wrongType[1] = 0x81;
    assert.match(
      errorOf(await postBinary(s.url, wrongType, { Accept: 'application/json' })).message,
      /unexpected message type 0x81/,
    );
    // Without Accept the error comes back in the binary encoding.
    const binErr = await postBinary(s.url, validCreate.subarray(0, 3));
    assert.is(binErr.headers['content-type'], BINARY);
    assert.is(binErr.body[0], 1);
    assert.is(binErr.body[1], 0xee);
    await alive(s);
  } finally {
    await s.stop();
  }
});

test('wrong JSON types and shapes: 400 naming the field', async () => {
  const s = await startTestServer({ config: { rateLimitPerMinute: 0 } });
  try {
    const b64 = key.toString('base64');
    const cases: Array<[unknown, RegExp]> = [
      [null, /must be a JSON object/],
      [[], /must be a JSON object/],
      ['create', /must be a JSON object/],
      [42, /must be a JSON object/],
      [{}, /field "op" is missing/],
      [{ op: 5 }, /field "op" must be a string, got number/],
      [{ op: 'delete' }, /field "op" must be "create", "fetch" or "unpublish"/],
      [{ op: 'fetch' }, /field "code" is missing/],
      [{ op: 'fetch', code: ['x'] }, /field "code" must be a string, got an array/],
      [{ op: 'fetch', code: null }, /field "code" must be a string, got null/],
      [{ op: 'fetch', code: 'x', extra: 1 }, /unknown field "extra" for op "fetch"/],
      [{ op: 'create', public_key: 123, email: 'a@example.org' }, /field "public_key" must be a string, got number/],
      [{ op: 'create', public_key: '!!!!', email: 'a@example.org' }, /field "public_key" must be standard base64/],
      [{ op: 'create', public_key: b64.replace(/=$/, ''), email: 'a@example.org' }, /standard base64 with padding/],
      [{ op: 'create', public_key: b64, email: { a: 1 } }, /field "email" must be a string, got object/],
      [{ op: 'create', public_key: b64, email: 'x'.repeat(5000) }, /too long|larger than/],
    ];
    for (const [body, pattern] of cases) {
      const res = await postJson(s.url, body);
      assert.match(errorOf(res).message, pattern, JSON.stringify(body).slice(0, 60));
    }
    const notJson = await http(`${s.url}/v1/share`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: '{"op":',
    });
    assert.match(errorOf(notJson).message, /not valid JSON/);
    const badUtf8 = await http(`${s.url}/v1/share`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: Buffer.from([0x7b, 0xff, 0xfe, 0x7d]),
    });
    assert.match(errorOf(badUtf8).message, /not valid JSON/);
    await alive(s);
  } finally {
    await s.stop();
  }
});

test('bad public keys: wrong type, length, zeros, low-order and off-curve points', async () => {
  const s = await startTestServer({ config: { rateLimitPerMinute: 0 } });
  try {
    const withType = Buffer.from(key);
    withType[0] = 2;
    const allZero = Buffer.concat([Buffer.from([1]), Buffer.alloc(64)]);
    // A point of order 8 on Curve25519 (u = 325606250916557431795983626356110631294008115727848805560023387167927233504).
    const lowOrder = Buffer.concat([
      Buffer.from([1]),
      Buffer.from('e0eb7a7c3b41b8ae1656e3faf19fc46ada098deb9c32b1fd866205165f49b800', 'hex'),
      key.subarray(33),
    ]);
    const offCurve = Buffer.concat([key.subarray(0, 33), Buffer.from('02'.padEnd(64, '0'), 'hex')]);
    const cases: Array<[Buffer, RegExp]> = [
      [withType, /unsupported public key type 0x02/],
      [key.subarray(0, 64), /must be 65 bytes .* got 64/],
      [Buffer.concat([key, Buffer.from([0])]), /got 66/],
      [allZero, /all zeros/],
      [lowOrder, /small-order point/],
      [offCurve, /Ed25519 part of the public key is not a valid point/],
    ];
    for (const [pk, pattern] of cases) {
      const res = await postBinary(s.url, encodeShareRequest({ op: 'create', publicKey: pk, email: 'k@example.org' }), {
        Accept: 'application/json',
      });
      const err = errorOf(res);
      assert.is(err.code, 'INVALID_PUBLIC_KEY');
      assert.match(err.message, pattern);
    }
    assert.is(s.sink.mails().length, 0);
  } finally {
    await s.stop();
  }
});

test('bodies over 4 KiB get 413 (declared or streamed); wrong media types 415', async () => {
  const s = await startTestServer({ config: { rateLimitPerMinute: 0 } });
  try {
    const declared = await postBinary(s.url, Buffer.alloc(1 << 20), { Accept: 'application/json' });
    assert.is(declared.status, 413);
    assert.is(errorOf(declared).code, 'PAYLOAD_TOO_LARGE');
    // Chunked, no Content-Length: cut off while streaming.
    const streamed = await new Promise<number>((resolve, reject) => {
      const sock = connect(Number(new URL(s.url).port), '127.0.0.1');
      let answer = '';
      sock.on('data', (d) => {
        answer += d.toString('latin1');
      });
      sock.on('close', () => resolve(Number(answer.slice(9, 12))));
      sock.on('error', reject);
      sock.write(`POST /v1/share HTTP/1.1\r\nHost: x\r\nContent-Type: ${BINARY}\r\nTransfer-Encoding: chunked\r\n\r\n`);
      const chunk = Buffer.alloc(1024, 0x41);
      for (let i = 0; i < 8; i++) sock.write(Buffer.concat([Buffer.from('400\r\n'), chunk, Buffer.from('\r\n')]));
      setTimeout(() => sock.end(), 500);
    });
    assert.is(streamed, 413);
    const noType = await http(`${s.url}/v1/share`, { method: 'POST', body: validCreate });
    assert.is(noType.status, 415);
    const textPlain = await http(`${s.url}/v1/share`, {
      method: 'POST',
      headers: { 'Content-Type': 'text/plain', Accept: 'application/json' },
      body: 'hi',
    });
    assert.is(textPlain.status, 415);
    assert.match(errorOf(textPlain).message, /not text\/plain/);
    const wrongMethod = await http(`${s.url}/v1/share`, { method: 'PUT', headers: { Accept: 'application/json' } });
    assert.is(wrongMethod.status, 405);
    assert.is(wrongMethod.headers.allow, 'POST');
    assert.is(wrongMethod.json().error.code, 'METHOD_NOT_ALLOWED');
    assert.is(
      (await http(`${s.url}/v1/share`, { method: 'PROPFIND', headers: { Accept: 'application/json' } })).status,
      405,
    );
    await alive(s);
  } finally {
    await s.stop();
  }
});

test('random verification paths: 404 pages, never 5xx', async () => {
  const s = await startTestServer({ config: { rateLimitPerMinute: 0 } });
  try {
    for (let i = 0; i < 100; i++) {
      const token = randomBytes(1 + (i % 60)).toString('base64url');
      const method = i % 2 ? 'POST' : 'GET';
      const res = await http(`${s.url}/verify/${token}`, { method });
      assert.is(res.status, 404, `${method} ${token}`);
    }
    for (const path of ['/verify/%E0%A4%A', '/verify/..%2f..%2fetc', '/verify/', '/v1/share/%00', '/%ff']) {
      const res = await http(`${s.url}${path}`);
      assert.ok(res.status >= 400 && res.status < 500, `${path}: ${res.status}`);
    }
    await alive(s);
  } finally {
    await s.stop();
  }
});

test('slow clients are cut off: trickled headers and trickled bodies', async () => {
  const s = await startTestServer({ timeouts: { headersMs: 600, requestMs: 1500, bodyMs: 600, checkIntervalMs: 100 } });
  try {
    const port = Number(new URL(s.url).port);
    const trickle = (lines: string[], intervalMs: number) =>
      new Promise<{ ms: number; answer: string }>((resolve) => {
        const started = Date.now();
        const sock = connect(port, '127.0.0.1');
        let answer = '';
        let i = 0;
        const timer = setInterval(() => {
          if (i < lines.length && !sock.destroyed) sock.write(lines[i++]!);
        }, intervalMs);
        sock.on('data', (d) => {
          answer += d.toString('latin1');
        });
        sock.on('error', () => undefined);
        sock.on('close', () => {
          clearInterval(timer);
          resolve({ ms: Date.now() - started, answer });
        });
      });
    const headers = Array.from({ length: 100 }, (_, i) =>
      i === 0 ? 'GET /v1/status HTTP/1.1\r\n' : `X-Slow-${i}: 1\r\n`,
    );
    // Either trickle takes 20 s when nothing cuts it off (100 pieces, 200 ms apart); the deadlines are
    // 0.6-1.5 s. The bound sits between, with room for a loaded CI machine.
    const slowHeaders = await trickle(headers, 200);
    assert.ok(slowHeaders.ms < 8000, `headers: closed after ${slowHeaders.ms} ms`);
    const body = [
      `POST /v1/share HTTP/1.1\r\nHost: x\r\nContent-Type: ${BINARY}\r\nContent-Length: 100\r\n\r\n`,
      ...Array<string>(100).fill('A'),
    ];
    const slowBody = await trickle(body, 200);
    assert.ok(slowBody.ms < 8000, `body: closed after ${slowBody.ms} ms`);
    assert.match(slowBody.answer, /^HTTP\/1\.1 (408|400)/);
    await alive(s);
  } finally {
    await s.stop();
  }
});

test.run();
