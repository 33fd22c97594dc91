/**
 * The rotation statement codec (src/vault/rotation/statement.ts): a round
 * trip, and every kind of garbage refused with BAD_ROTATION and a message
 * that names what is wrong.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { VaultError } from '../../src/vault/index.js';
import { generateKeyPairs, wipeKeyPairs, type KeyPairs } from '../../src/vault/identity.js';
import {
  decodeStatement,
  makeStatement,
  parseStatement,
  statementHash,
  statementText,
  STATEMENT_BYTES,
  TEXT_PREFIX,
} from '../../src/vault/rotation/index.js';

let a: KeyPairs;
let b: KeyPairs;
let m: KeyPairs;

test.before(() => {
  [a, b, m] = [generateKeyPairs(), generateKeyPairs(), generateKeyPairs()];
});
test.after(() => {
  for (const k of [a, b, m]) wipeKeyPairs(k);
});

function refused(fn: () => unknown, message: RegExp): void {
  try {
    fn();
  } catch (err) {
    assert.instance(err, VaultError);
    assert.is((err as VaultError).code, 'BAD_ROTATION');
    assert.match((err as Error).message, message);
    return;
  }
  assert.unreachable('accepted');
}

test('a statement round-trips through its text form, and both keys, the time and the hash survive', () => {
  const at = new Date('2031-02-03T04:05:06.789Z');
  const s = makeStatement(a, b, a.secret.ed25519, b.secret.ed25519, at);
  assert.is(s.bytes.length, STATEMENT_BYTES);
  assert.is(STATEMENT_BYTES, 275);
  const text = statementText(s);
  assert.ok(text.startsWith(TEXT_PREFIX));
  assert.match(text, /^stash-rotation-v1:[A-Za-z0-9_-]+$/);
  const back = parseStatement(`  ${text}\n`);
  assert.ok(back.old.ed25519.equals(a.ed25519) && back.old.x25519.equals(a.x25519));
  assert.ok(back.new.ed25519.equals(b.ed25519) && back.new.x25519.equals(b.x25519));
  assert.is(back.createdAt.toISOString(), at.toISOString());
  assert.is(statementHash(back), statementHash(s));
  assert.is.not(statementHash(makeStatement(a, m, a.secret.ed25519, m.secret.ed25519, at)), statementHash(s));
});

test('signatures: by another old key, by another new key, or any changed byte, is refused', () => {
  const s = makeStatement(a, b, a.secret.ed25519, b.secret.ed25519);
  // Mallory signs a statement that names A as the old key.
  refused(() => makeStatement(a, m, m.secret.ed25519, m.secret.ed25519), /not signed by the old key/);
  // A's key signs, but the new key's proof of possession is someone else's.
  refused(() => makeStatement(a, b, a.secret.ed25519, m.secret.ed25519), /not signed by the new key/);
  for (const at of [9 + 40, 74 + 40, 140, 150, 230, 274]) {
    const t = Buffer.from(s.bytes);
    t[at] = t[at]! ^ 0x01;
    assert.throws(
      () => decodeStatement(t),
      (err: VaultError) => err.code === 'BAD_ROTATION',
      `byte ${at} changed`,
    );
  }
});

test('garbage: wrong length, magic, version, keys, time, text form', () => {
  const s = makeStatement(a, b, a.secret.ed25519, b.secret.ed25519);
  refused(() => decodeStatement(Buffer.alloc(0)), /0 bytes, a statement is 275/);
  refused(() => decodeStatement(Buffer.concat([s.bytes, Buffer.alloc(1)])), /276 bytes/);
  refused(() => decodeStatement(s.bytes.subarray(0, 274)), /274 bytes/);
  refused(() => decodeStatement('text' as unknown as Buffer), /not bytes/);
  const with_ = (at: number, v: number) => {
    const t = Buffer.from(s.bytes);
    t[at] = v;
    return t;
  };
  refused(() => decodeStatement(with_(0, 0x41)), /magic/);
  refused(() => decodeStatement(with_(8, 2)), /unknown version 2/);
  refused(() => decodeStatement(with_(9, 0x02)), /old key is unusable/);
  refused(() => decodeStatement(with_(74, 0x02)), /new key is unusable/);
  const lowOrder = Buffer.from(s.bytes);
  lowOrder.fill(0, 10, 42); // an all-zero X25519 key
  refused(() => decodeStatement(lowOrder), /old key is unusable/);
  const sameKeys = Buffer.from(s.bytes);
  s.bytes.copy(sameKeys, 74, 9, 74);
  refused(() => decodeStatement(sameKeys), /same/);
  const late = Buffer.from(s.bytes);
  late.writeBigUInt64LE(BigInt(8.64e15) + 1n, 139);
  refused(() => decodeStatement(late), /creation time is out of range/);

  const text = statementText(s);
  refused(() => parseStatement(''), /does not start with "stash-rotation-v1:"/);
  refused(() => parseStatement(text.replace('v1', 'v2')), /does not start with/);
  refused(() => parseStatement(`${text}==`), /not base64url/);
  refused(() => parseStatement(`${text.slice(0, 40)} ${text.slice(40)}`), /not base64url/);
  refused(() => parseStatement(`${text}\n${text}`), /not base64url/);
  refused(() => parseStatement(text.slice(0, -4)), /bytes, a statement is 275/);
  refused(() => parseStatement('x'.repeat(5000)), /far longer than a statement/);
  refused(() => parseStatement(7 as unknown as string), /not text/);
});

test('a text whose unused low bits are set is refused: one statement has one text form', () => {
  const text = statementText(makeStatement(a, b, a.secret.ed25519, b.secret.ed25519));
  const abc = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
  // 275 bytes end in a group of two: the last character carries 4 bits and 2 unused ones.
  const last = abc.indexOf(text.at(-1)!);
  assert.is(last & 3, 0, 'the canonical form leaves them clear');
  const loose = `${text.slice(0, -1)}${abc[last | 1]}`;
  assert.ok(Buffer.from(loose.slice(TEXT_PREFIX.length), 'base64url').equals(parseStatement(text).bytes));
  refused(() => parseStatement(loose), /not in canonical base64url/);
});

test.run();
