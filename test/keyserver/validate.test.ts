/**
 * Public key validation is exactly as strict as before the publish path was
 * made cheaper: the small-order check compares with libsodium's list instead
 * of multiplying, and it refuses exactly what the multiplication refused (the
 * old check runs beside it here); the Ed25519 point check is remembered only
 * for keys that passed it.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import sodiumModule from 'sodium-native';
import { SMALL_ORDER_X25519, validatePublicKey } from '../../src/keyserver/validate.js';

const sodium = sodiumModule as typeof sodiumModule & {
  crypto_scalarmult(q: Buffer, n: Buffer, p: Buffer): void;
  crypto_core_ed25519_add(r: Buffer, p: Buffer, q: Buffer): void;
};

function rawPublic(type: 'x25519' | 'ed25519'): Buffer {
  const der = generateKeyPairSync(type as 'x25519').publicKey.export({ format: 'der', type: 'spki' });
  return der.subarray(der.length - 32);
}

const goodX = rawPublic('x25519');
const goodEd = rawPublic('ed25519');
const keyOf = (x: Buffer, ed: Buffer) => Buffer.concat([Buffer.from([1]), x, ed]);

/** The message of the refusal, or undefined when the key is accepted. */
function refusal(key: Buffer): string | undefined {
  try {
    validatePublicKey(key);
    return undefined;
  } catch (err) {
    assert.is((err as { code?: string }).code, 'INVALID_PUBLIC_KEY');
    return (err as Error).message;
  }
}

/** The check used before: libsodium's X25519 with a random scalar refuses (throws) a small-order point. */
function multiplicationRefuses(x: Buffer): boolean {
  const out = Buffer.alloc(32);
  try {
    sodium.crypto_scalarmult(out, randomBytes(32), x);
    return false;
  } catch {
    return true;
  }
}

const P = 2n ** 255n - 19n;
const le = (n: bigint) => Buffer.from(n.toString(16).padStart(64, '0'), 'hex').reverse();

test('the known small-order X25519 points are refused, as the multiplication refused them', () => {
  // The order-8 points by their decimal u-coordinates (cr.yp.to/ecdh.html), 1, and p - 1.
  const known = [
    1n,
    325606250916557431795983626356110631294008115727848805560023387167927233504n,
    39382357235489614581723060781553021112529911719440698176882885853963445705823n,
    P - 1n,
  ].map(le);
  for (const x of known)
    assert.ok(
      SMALL_ORDER_X25519.some((b) => b.equals(x)),
      x.toString('hex'),
    );
  for (const x of SMALL_ORDER_X25519) {
    assert.ok(multiplicationRefuses(x), `libsodium refuses ${x.toString('hex')}`);
    const message = refusal(keyOf(x, goodEd));
    assert.ok(message !== undefined, `refused: ${x.toString('hex')}`);
    if (x.some((b) => b !== 0)) assert.match(message!, /small-order point/);
  }
});

test('non-canonical forms of the small-order points (top bit set, p, p + 1) are refused too', () => {
  const forms = [P, P + 1n].map(le);
  for (const x of SMALL_ORDER_X25519) {
    const high = Buffer.from(x);
    high[31]! |= 0x80;
    forms.push(high);
  }
  for (const x of forms) {
    assert.ok(multiplicationRefuses(x), `libsodium refuses ${x.toString('hex')}`);
    assert.match(refusal(keyOf(x, goodEd)) ?? 'accepted', /not canonically encoded/, x.toString('hex'));
  }
});

test('on random and real X25519 keys the comparison accepts exactly what the multiplication accepts', () => {
  for (let i = 0; i < 2000; i++) {
    const x = i % 4 === 0 ? rawPublic('x25519') : randomBytes(32);
    x[31]! &= 0x7f; // canonical (random values at or above p are vanishingly rare)
    const refusedBefore = multiplicationRefuses(x);
    const message = refusal(keyOf(x, goodEd));
    assert.is(message !== undefined, refusedBefore, `${x.toString('hex')}: ${message}`);
  }
});

test('Ed25519: small-order, mixed-order and off-curve points are refused, each time they are sent', () => {
  const torsion = [
    '0100000000000000000000000000000000000000000000000000000000000000', // identity
    'ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f', // order 2
    '0000000000000000000000000000000000000000000000000000000000000080', // order 4
    'c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a', // order 8
    '26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05', // order 8
  ].map((h) => Buffer.from(h, 'hex'));
  const mixed = Buffer.alloc(32);
  sodium.crypto_core_ed25519_add(mixed, goodEd, torsion[4]!); // a valid point plus one of order 8
  const offCurve = Buffer.from('02'.padEnd(64, '0'), 'hex');
  for (const ed of [...torsion, mixed, offCurve]) {
    for (let round = 0; round < 2; round++) {
      assert.match(
        refusal(keyOf(goodX, ed)) ?? 'accepted',
        /Ed25519 part of the public key is not a valid point/,
        `${ed.toString('hex')} round ${round}`,
      );
    }
  }
});

test('a valid key is accepted each time, and a valid Ed25519 half does not let a bad X25519 half through', () => {
  const key = keyOf(goodX, goodEd);
  for (let round = 0; round < 3; round++) assert.ok(validatePublicKey(key).equals(key));
  assert.match(refusal(keyOf(SMALL_ORDER_X25519[2]!, goodEd)) ?? 'accepted', /small-order point/);
  // More distinct keys than the memory of checked points holds: every one still checked and accepted.
  for (let i = 0; i < 1100; i++) assert.is(refusal(keyOf(goodX, rawPublic('ed25519'))), undefined);
  assert.is(refusal(key), undefined);
});

test.run();
