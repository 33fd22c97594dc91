import { createRequire } from 'node:module';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import {
  decodePublicKey,
  encodePublicKey,
  fingerprintOf,
  fingerprintsEqual,
  formatFingerprint,
  parseFingerprint,
} from '../../src/vault/index.js';
import { expectCode } from './vault-fixture.js';

const sodium = createRequire(import.meta.url)('sodium-native');

function keyPair() {
  const x25519 = Buffer.alloc(32);
  const ed25519 = Buffer.alloc(32);
  sodium.crypto_box_keypair(x25519, Buffer.alloc(32));
  sodium.crypto_sign_keypair(ed25519, Buffer.alloc(64));
  return { x25519, ed25519 };
}

const SHAPE = /^[0-9A-HJKMNP-TV-Z]{4}(-[0-9A-HJKMNP-TV-Z]{4}){5}$/;

test('known answer, computed independently with Python hashlib.blake2b', () => {
  const x = Buffer.from([...Array(32).keys()]);
  const ed = Buffer.from([...Array(32).keys()].map((i) => i + 32));
  const fp = fingerprintOf(x, ed);
  assert.is(fp.toString('hex'), 'fb9475779c1a410bcd4db8541e0857');
  assert.is(formatFingerprint(fp), 'ZEA7-AXWW-390G-QKAD-Q1A1-W22Q');
});

test('format: 6 groups of 4 Crockford base32 characters; parse round trips', () => {
  for (let i = 0; i < 200; i++) {
    const fp = Buffer.alloc(15);
    sodium.randombytes_buf(fp);
    const s = formatFingerprint(fp);
    assert.match(s, SHAPE);
    assert.ok(parseFingerprint(s).equals(fp));
  }
  assert.is(formatFingerprint(Buffer.alloc(15)), '0000-0000-0000-0000-0000-0000');
  assert.is(formatFingerprint(Buffer.alloc(15, 0xff)), 'ZZZZ-ZZZZ-ZZZZ-ZZZZ-ZZZZ-ZZZZ');
});

test('parse tolerates case, spacing, hyphens and I/L/O confusables', () => {
  const fp = fingerprintOf(Buffer.alloc(32, 1), Buffer.alloc(32, 2));
  const s = formatFingerprint(fp);
  const variants = [
    s.toLowerCase(),
    s.replace(/-/g, ''),
    s.replace(/-/g, ' '),
    `  ${s.replace(/-/g, '  ')}\n`,
    s.replace(/-/g, '\u2013'), // en dash from a word processor
    s.replace(/(.{2})/g, '$1 '), // odd grouping
  ];
  for (const v of variants) assert.ok(parseFingerprint(v).equals(fp), v);
  const base = 'ZEA7-AXWW-390G-QKAD-Q1A1-W22Q';
  const expected = parseFingerprint(base);
  assert.ok(parseFingerprint('ZEA7-AXWW-39OG-QKAD-QIA1-W22Q').equals(expected), 'O->0, I->1');
  assert.ok(parseFingerprint('zea7 axww 39og qkad qla1 w22q').equals(expected), 'o->0, l->1');
});

test('parse rejects garbage with a specific message', () => {
  const good = 'ZEA7-AXWW-390G-QKAD-Q1A1-W22Q';
  assert.match(expectCode(() => parseFingerprint(good.slice(0, -1)), 'BAD_FINGERPRINT').message, /24 characters.*23/);
  assert.match(expectCode(() => parseFingerprint(`${good}7`), 'BAD_FINGERPRINT').message, /25/);
  assert.match(
    expectCode(() => parseFingerprint(good.replace('Q', 'U')), 'BAD_FINGERPRINT').message,
    /U is never used/,
  );
  assert.match(expectCode(() => parseFingerprint(good.replace('Q', '*')), 'BAD_FINGERPRINT').message, /"\*"/);
  expectCode(() => parseFingerprint(''), 'BAD_FINGERPRINT');
  expectCode(() => parseFingerprint('x'.repeat(10_000)), 'BAD_FINGERPRINT');
  expectCode(() => parseFingerprint(42 as unknown as string), 'BAD_FINGERPRINT');
  expectCode(() => formatFingerprint(Buffer.alloc(16)), 'BAD_FINGERPRINT');
});

test('fingerprintsEqual: bytes or text, every bit matters, garbage is an error', () => {
  const { x25519, ed25519 } = keyPair();
  const fp = fingerprintOf(x25519, ed25519);
  assert.ok(fingerprintsEqual(fp, formatFingerprint(fp)));
  assert.ok(fingerprintsEqual(formatFingerprint(fp).toLowerCase(), fp));
  for (let bit = 0; bit < 120; bit += 7) {
    const other = Buffer.from(fp);
    other[bit >> 3]! ^= 1 << (bit & 7);
    assert.not.ok(fingerprintsEqual(fp, other), `bit ${bit}`);
    assert.not.ok(fingerprintsEqual(formatFingerprint(fp), formatFingerprint(other)));
  }
  assert.not.ok(fingerprintsEqual(fp, Buffer.alloc(14)));
  expectCode(() => fingerprintsEqual(fp, 'not a fingerprint'), 'BAD_FINGERPRINT');
});

test('the fingerprint covers both keys, in order', () => {
  const a = keyPair();
  const b = keyPair();
  const fp = fingerprintOf(a.x25519, a.ed25519);
  assert.ok(fp.equals(fingerprintOf(Buffer.from(a.x25519), Buffer.from(a.ed25519))), 'deterministic');
  assert.not.ok(fp.equals(fingerprintOf(b.x25519, a.ed25519)));
  assert.not.ok(fp.equals(fingerprintOf(a.x25519, b.ed25519)));
  assert.not.ok(fp.equals(fingerprintOf(a.ed25519, a.x25519)));
  expectCode(() => fingerprintOf(Buffer.alloc(31), a.ed25519), 'BAD_PUBLIC_KEY');
});

test('public key encoding: tag 0x01 + X25519 + Ed25519, round trip', () => {
  const k = keyPair();
  const enc = encodePublicKey(k);
  assert.is(enc.length, 65);
  assert.is(enc[0], 1);
  assert.ok(enc.subarray(1, 33).equals(k.x25519));
  assert.ok(enc.subarray(33).equals(k.ed25519));
  const dec = decodePublicKey(enc);
  assert.ok(dec.x25519.equals(k.x25519) && dec.ed25519.equals(k.ed25519));
  enc.fill(0);
  assert.ok(dec.x25519.equals(k.x25519), 'decode returns copies');
  assert.ok(decodePublicKey(new Uint8Array(encodePublicKey(k))).x25519.equals(k.x25519), 'accepts a Uint8Array');
});

test('public key decoding is strict', () => {
  const k = keyPair();
  const good = encodePublicKey(k);
  const withX = (x: Buffer) => Buffer.concat([Buffer.from([1]), x, k.ed25519]);
  const withEd = (ed: Buffer) => Buffer.concat([Buffer.from([1]), k.x25519, ed]);
  const cases: Array<[string, Uint8Array, RegExp]> = [
    ['short', good.subarray(0, 64), /65 bytes; got 64/],
    ['long', Buffer.concat([good, Buffer.from([0])]), /got 66/],
    ['empty', Buffer.alloc(0), /got 0/],
    ['unknown tag', Buffer.concat([Buffer.from([2]), good.subarray(1)]), /type 0x02/],
    ['X25519 zero point', withX(Buffer.alloc(32)), /low-order/],
    [
      'X25519 order-2 point',
      withX(Buffer.from('ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f', 'hex')),
      /low-order/,
    ],
    ['X25519 point 1', withX(Buffer.concat([Buffer.from([1]), Buffer.alloc(31)])), /low-order/],
    ['X25519 high bit', withX(Buffer.from(k.x25519.map((b, i) => (i === 31 ? b | 0x80 : b)))), /canonical/],
    [
      'X25519 >= p',
      withX(Buffer.from('edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f', 'hex')),
      /canonical/,
    ],
    ['Ed25519 identity', withEd(Buffer.concat([Buffer.from([1]), Buffer.alloc(31)])), /Ed25519/],
    ['Ed25519 zero', withEd(Buffer.alloc(32)), /Ed25519/],
  ];
  for (const [what, bytes, message] of cases) {
    const e = expectCode(() => decodePublicKey(bytes), 'BAD_PUBLIC_KEY', what);
    assert.match(e.message, message, what);
  }
  expectCode(() => decodePublicKey('abc' as unknown as Buffer), 'BAD_PUBLIC_KEY');
  expectCode(() => encodePublicKey({ x25519: Buffer.alloc(32), ed25519: k.ed25519 }), 'BAD_PUBLIC_KEY');
});

test.run();
