import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { Writer } from '../../src/keyserver/wire/codec.js';
import {
  decodeError,
  decodeShareRequest,
  decodeShareResponse,
  decodeStatus,
  decodeTopology,
  encodeError,
  encodeShareRequest,
  encodeShareResponse,
  encodeStatus,
  encodeTopology,
  type StatusResponse,
  type TopologyResponse,
} from '../../src/keyserver/wire/messages.js';
import { decodeJsonShareRequest } from '../../src/keyserver/wire/json.js';
import { unpublishSignedBytes } from '../../src/keyserver/wire/unpublish-signature.js';
import { maskEmail, validateEmail, validatePublicKey } from '../../src/keyserver/validate.js';
import { identityPublicKey } from './harness.js';

const fail = (m: string) => new Error(m);
const key = identityPublicKey();

test('the writer writes text as UTF-8 with its byte length, ASCII or not, and refuses what does not fit', () => {
  // ASCII takes a shorter path than other text; a non-ASCII character late in a string must undo it.
  const cases: Array<[string, number[]]> = [
    ['', [0]],
    ['abc', [3, 0x61, 0x62, 0x63]],
    ['ab€', [5, 0x61, 0x62, 0xe2, 0x82, 0xac]],
    ['\u007f\u0080', [3, 0x7f, 0xc2, 0x80]],
  ];
  for (const [text, bytes] of cases) {
    const w = new Writer(16).u8(7).text(text, 1).u8(8);
    assert.equal([...w.finish()], [7, ...bytes, 8], JSON.stringify(text));
  }
  const long = new Writer(16).text('x'.repeat(255), 1).text('y'.repeat(300), 2).finish();
  assert.is(long.length, 1 + 255 + 2 + 300);
  assert.is(long[0], 255);
  assert.equal([...long.subarray(256, 258)], [0x01, 0x2c]);
  assert.throws(() => new Writer().text('x'.repeat(256), 1), /text too long/);
  assert.throws(() => new Writer().text(`${'x'.repeat(254)}é`, 1), /text too long/);
});

test('the writer grows past its first buffer and writes every field big-endian, exactly', () => {
  const w = new Writer(16);
  const expected: number[] = [];
  for (let i = 0; i < 200; i++) {
    w.u8(i)
      .u16(0xbeef)
      .u32(0xdeadbeef)
      .u64(2 ** 53 - 1 - i)
      .text('é', 1)
      .bytes(Uint8Array.of(i, 255 - i));
    expected.push(
      i,
      0xbe,
      0xef,
      0xde,
      0xad,
      0xbe,
      0xef,
      0x00,
      0x1f,
      0xff,
      0xff,
      0xff,
      0xff,
      0xff,
      0xff - i,
      2,
      0xc3,
      0xa9,
      i,
      255 - i,
    );
  }
  w.setU32(1, 0x01020304).setU8(0, 9);
  expected.splice(1, 4, 1, 2, 3, 4);
  expected[0] = 9;
  assert.equal([...w.finish()], expected);
  assert.throws(() => new Writer().u64(2 ** 53), /out of range/);
  assert.throws(() => new Writer().text('x'.repeat(256), 1), /too long/);
  assert.throws(() => new Writer().u8(1).setU32(0, 1), /no u32 written/);
  const again = new Writer(16).u32(1).u32(2);
  assert.equal([...again.reset().u8(7).finish()], [7], 'reset starts over in the same buffer');
});

test('share requests and responses round-trip through the binary encoding', () => {
  const create = { op: 'create' as const, publicKey: key, email: 'a@example.org' };
  const bytes = encodeShareRequest(create);
  assert.equal([...bytes.subarray(0, 3)], [1, 0x01, 65], 'version, type, key length');
  assert.is(bytes.length, 3 + 65 + 1 + 13);
  assert.equal(decodeShareRequest(bytes, fail), create);
  const fetchReq = { op: 'fetch' as const, code: '0A-7K3M-9QXD-W2HF-Z' };
  assert.equal(decodeShareRequest(encodeShareRequest(fetchReq), fail), fetchReq);

  const created = {
    type: 'created' as const,
    code: '0A-7K3M-9QXD-W2HF-Z',
    expiresAt: 1_900_000_000_123,
    verification: 'failed' as const,
    message: 'é ok',
  };
  assert.equal(decodeShareResponse(encodeShareResponse(created), fail), created);
  const fetched = {
    type: 'fetched' as const,
    code: '0A-7K3M-9QXD-W2HF-Z',
    publicKey: key,
    email: 'a@example.org',
    verifiedAt: 1,
    fetchCount: 4_000_000_000,
    expiresAt: 2 ** 53 - 1,
  };
  assert.equal(decodeShareResponse(encodeShareResponse(fetched), fail), fetched);
});

test('unpublish: the request and answer byte by byte (docs/http-api.md), the signed bytes, the JSON form', () => {
  const nonce = Buffer.alloc(16, 0xab);
  const signature = Buffer.alloc(64, 0xcd);
  const req = { op: 'unpublish' as const, code: '0A-7K3M-9QXD-W2HF-Z', timestamp: 1_893_456_000_123, nonce, signature };
  const bytes = encodeShareRequest(req);
  assert.equal([...bytes.subarray(0, 3)], [1, 0x03, 19], 'version, type, code length');
  assert.equal([...bytes.subarray(22, 30)], [0x00, 0x00, 0x01, 0xb8, 0xda, 0xc5, 0xb4, 0x7b], 'timestamp, u64 ms');
  assert.is(bytes[30], 16);
  assert.is(bytes[47], 64);
  assert.is(bytes.length, 3 + 19 + 8 + 1 + 16 + 1 + 64);
  assert.equal(decodeShareRequest(bytes, fail), req);
  assert.throws(
    () => decodeShareRequest(Buffer.concat([bytes, Buffer.from([0])]), fail),
    /unexpected byte\(s\) after the end/,
  );

  const signed = unpublishSignedBytes('0A7K3M9QXDW2HFZ', req.timestamp, nonce);
  assert.equal(signed.subarray(0, 19).toString('latin1'), 'stash-unpublish-v1\n');
  assert.equal([...signed.subarray(19, 20)], [15]);
  assert.is(signed.subarray(20, 35).toString('latin1'), '0A7K3M9QXDW2HFZ');
  assert.equal(signed.subarray(35, 43), bytes.subarray(22, 30));
  assert.equal(signed.subarray(43), nonce);
  assert.throws(() => unpublishSignedBytes('0A7K3M9QXDW2HFZ', 1, Buffer.alloc(15)), /16 bytes/);

  const done = { type: 'unpublished' as const, code: '0A-7K3M-9QXD-W2HF-Z', deletedAt: 1_893_456_000_999 };
  const answer = encodeShareResponse(done);
  assert.equal([...answer.subarray(0, 3)], [1, 0x85, 19]);
  assert.is(answer.length, 3 + 19 + 8);
  assert.equal(decodeShareResponse(answer, fail), done);

  const json = {
    op: 'unpublish',
    code: req.code,
    timestamp: '2030-01-01T00:00:00.123Z',
    nonce: nonce.toString('base64'),
    signature: signature.toString('base64'),
  };
  assert.equal(decodeJsonShareRequest(Buffer.from(JSON.stringify(json)), fail), {
    ...req,
    timestamp: Date.UTC(2030, 0, 1, 0, 0, 0, 123),
  });
  for (const timestamp of ['2030-01-01T00:00:00Z', '2030-01-01 00:00:00.123Z', 'soon', '']) {
    assert.throws(
      () => decodeJsonShareRequest(Buffer.from(JSON.stringify({ ...json, timestamp })), fail),
      /field "timestamp" must be a time/,
      timestamp,
    );
  }
  assert.throws(
    () => decodeJsonShareRequest(Buffer.from(JSON.stringify({ ...json, extra: 1 })), fail),
    /unknown field "extra" for op "unpublish"/,
  );
});

test('topology, status and errors round-trip; unknown status fields are skipped', () => {
  const t: TopologyResponse = {
    clusterId: 'eu',
    topologyVersion: 0xffffffff,
    serverId: 9,
    servers: [
      { id: 0, url: 'https://a.example.org', status: 'active' },
      { id: 9, url: 'https://b.example.org', status: 'promoted' },
    ],
    routes: [{ owner: 0, primary: 0, failovers: [9, 1] }],
    promotedOwners: [0],
  };
  assert.equal(decodeTopology(encodeTopology(t), fail), t);
  const st: StatusResponse = {
    replication_pending: 3,
    replication_last_sequence: 99,
    shares_live: 5,
    shares_pending: 1,
    store_bytes: 12345,
    uptime_seconds: 60,
    server_id: 2,
    origin_epoch: 1_700_000_000_000,
    store_skipped_ranges: 2,
    store_skipped_bytes: 300,
    config_loaded_at: 1_700_000_000_500,
  };
  assert.equal(decodeStatus(encodeStatus(st), fail), { ...st, unknown: 0 });
  // A newer server adds field 200: an older client reads the rest.
  const w = new Writer().u8(1).u8(0x84).u8(2).u8(2).u64(7).u8(200).u64(1);
  const decoded = decodeStatus(w.finish(), fail);
  assert.is(decoded.replication_last_sequence, 7);
  assert.is(decoded.replication_pending, 0);
  assert.is(decoded.unknown, 1);
  const e = { code: 'RATE_LIMITED', message: 'slow down', retryAfter: 42, limit: 'emails-per-ip' };
  assert.equal(decodeError(encodeError(e), fail), e);
});

test('decoders refuse values beyond 2^53, bad UTF-8 and unknown enum values', () => {
  const big = new Writer()
    .u8(1)
    .u8(0x84)
    .u8(1)
    .u8(1)
    .bytes(Buffer.from([0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0]))
    .finish();
  assert.throws(() => decodeStatus(big, fail), /too large/);
  const badText = new Writer()
    .u8(1)
    .u8(0x02)
    .u8(2)
    .bytes(Buffer.from([0xc3, 0x28]))
    .finish();
  assert.throws(() => decodeShareRequest(badText, fail), /share code is not valid UTF-8/);
  const badVerification = Buffer.from(
    encodeShareResponse({ type: 'created', code: 'x', expiresAt: 0, verification: 'sent', message: '' }),
  );
  badVerification[3 + 8 + 1] = 9;
  assert.throws(() => decodeShareResponse(badVerification, fail), /unknown verification state 9/);
});

test('the JSON request decoder accepts exactly the documented shapes', () => {
  const b64 = key.toString('base64');
  const body = (v: unknown) => Buffer.from(JSON.stringify(v));
  const req = decodeJsonShareRequest(body({ op: 'create', public_key: b64, email: 'a@example.org' }), fail);
  assert.is(req.op, 'create');
  if (req.op === 'create') assert.ok(Buffer.from(req.publicKey).equals(key));
  assert.equal(decodeJsonShareRequest(body({ op: 'fetch', code: 'abc' }), fail), { op: 'fetch', code: 'abc' });
  assert.throws(
    () => decodeJsonShareRequest(body({ op: 'create', public_key: `-${b64.slice(1)}`, email: 'a@b.org' }), fail),
    /base64/,
  );
});

test('email validation: accepted and refused addresses', () => {
  const ok: Array<[string, string]> = [
    ['alice@example.org', 'alice@example.org'],
    ['Alice.B+tag@Mail.Example.ORG', 'Alice.B+tag@mail.example.org'],
    ['a_b%c=d-e@xn--bcher-kva.example', 'a_b%c=d-e@xn--bcher-kva.example'],
    [`${'a'.repeat(64)}@example.org`, `${'a'.repeat(64)}@example.org`],
  ];
  for (const [input, out] of ok) assert.is(validateEmail(input), out, input);
  const bad: Array<[string, RegExp]> = [
    ['', /empty/],
    ['-x@example.org', /must not start with "-"/],
    ['a b@example.org', /whitespace or control/],
    ['a@example.org\n', /whitespace or control/],
    ['a\u0000@example.org', /whitespace or control/],
    ['ä@example.org', /must be ASCII/],
    ['a@b@example.org', /local@domain/],
    ['@example.org', /local@domain/],
    ['a@', /at least two labels/],
    ['a@localhost', /at least two labels/],
    ['a..b@example.org', /no leading, trailing or double dots/],
    ['.a@example.org', /no leading, trailing or double dots/],
    ['"a"@example.org', /part before @ may hold/],
    ['a;rm@example.org', /part before @ may hold/],
    ['a$(id)@example.org', /part before @ may hold/],
    ['a@-example.org', /domain label/],
    ['a@example-.org', /domain label/],
    ['a@exa_mple.org', /domain label/],
    ['a@example..org', /domain label/],
    ['a@1.2.3.4', /not an IP address/],
    [`${'a'.repeat(65)}@example.org`, /longer than 64/],
    [`a@${'b'.repeat(64)}.org`, /domain label/],
    [`a@${'b.'.repeat(130)}org`, /longer than 254/],
  ];
  for (const [input, pattern] of bad) {
    try {
      validateEmail(input);
      assert.unreachable(`accepted ${JSON.stringify(input)}`);
    } catch (err) {
      assert.is((err as { code?: string }).code, 'INVALID_EMAIL', input);
      assert.match((err as Error).message, pattern, input);
      assert.not.ok((err as Error).message.includes(input) && input.length > 3, 'the address is not echoed');
    }
  }
  assert.is(maskEmail('alice@example.org'), 'a***@example.org');
});

test('a real identity key is accepted and returned as a copy', () => {
  const out = validatePublicKey(key);
  assert.ok(out.equals(key));
  assert.ok(out.buffer !== key.buffer || out.byteOffset !== key.byteOffset);
});

test.run();
