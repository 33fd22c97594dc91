/**
 * The parsers behind the AEAD. Bit flips never reach them (authentication
 * fails first), so these feed them authentic-but-malformed plaintext, as a
 * buggy or hostile writer holding the key could.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { sealWithNonce } from '../../src/vault/aead.js';
import { changeTime, decodeBody, encodeBody, PAD_BLOCK, withChangeTimes } from '../../src/vault/container-body.js';
import { listContacts, MAX_VALUE_BYTES, vaultPaths } from '../../src/vault/index.js';
import { cleanup, expectCode, newVault } from './vault-fixture.js';

test.after.each(cleanup);

/** A body plaintext from raw parts, padded like the real encoder. */
function body(count: number, parts: Buffer[], pad = true): Buffer {
  const head = Buffer.alloc(4);
  head.writeUInt32LE(count);
  const raw = Buffer.concat([head, ...parts]);
  if (!pad) return raw;
  return Buffer.concat([raw, Buffer.alloc(Math.ceil((raw.length + 1) / PAD_BLOCK) * PAD_BLOCK - raw.length)]);
}

function entry(name: string, value: Buffer, declaredLength = value.length): Buffer {
  const len = Buffer.alloc(4);
  len.writeUInt32LE(declaredLength);
  return Buffer.concat([Buffer.from([name.length]), Buffer.from(name, 'latin1'), len, value]);
}

test('the body encoder and decoder agree', () => {
  const entries = new Map([
    ['B', Buffer.from('2')],
    ['A', Buffer.from('1')],
    ['E', Buffer.alloc(0)],
  ]);
  const plain = encodeBody(entries);
  assert.is(plain.length % PAD_BLOCK, 0);
  const back = decodeBody(plain, 'x');
  assert.equal([...back.keys()], ['A', 'B', 'E']);
  assert.ok(back.get('B')!.equals(Buffer.from('2')));
  assert.ok(
    decodeBody(body(1, [entry('A', Buffer.from('1'))]), 'x')
      .get('A')!
      .equals(Buffer.from('1')),
  );
  // A body exactly filling its blocks still carries one full padding block.
  const exact = encodeBody(new Map([['A', Buffer.alloc(PAD_BLOCK - 9 - 2 - 1 - 4)]]));
  assert.is(exact.length, 2 * PAD_BLOCK);
  decodeBody(exact, 'x');
});

test('version 2: a marker and version byte, paths and fields as names; version 1 still read; a later version refused', () => {
  const entries = new Map([
    ['web/github.com', Buffer.from('pw')],
    ['web/github.com#username', Buffer.from('pat')],
    ['API_TOKEN', Buffer.from('t')],
    [`${'a'.repeat(128)}/${'b'.repeat(127)}`, Buffer.from('long')],
  ]);
  const plain = encodeBody(entries);
  assert.is(plain.readUInt32LE(0), 0xffffffff, 'the marker no version-1 count can be');
  assert.is(plain[4], 2, 'body version 2');
  assert.is(plain.readUInt32LE(5), 4, 'the count');
  assert.is(plain.readUInt16LE(9), 'API_TOKEN'.length, 'u16 name lengths, names in code-unit order');
  const back = decodeBody(plain, 'x');
  assert.equal([...back.keys()], [...entries.keys()].sort());
  assert.ok(back.get('web/github.com#username')!.equals(Buffer.from('pat')));
  const later = Buffer.from(plain);
  later[4] = 3;
  assert.throws(() => decodeBody(later, '/v/x.stash'), /body version 3; this stash reads versions 1 and 2/);
  // A path is no name of a version-1 body, and a field key no path.
  assert.throws(() => decodeBody(body(1, [entry('a/b', Buffer.from('1'))]), 'x'), /invalid entry name/);
  for (const bad of ['a//b', '../a', 'a#User', 'a#', '/a']) {
    const one = encodeBody(new Map([['zz', Buffer.from('1')]]));
    const name = Buffer.from(bad.padEnd(2, 'x').slice(0, Math.max(2, bad.length)));
    assert.ok(name.length >= 2);
    const forged = Buffer.concat([one.subarray(0, 9), Buffer.from([name.length, 0]), name, one.subarray(13)]);
    const padded = Buffer.concat([forged, Buffer.alloc((PAD_BLOCK - (forged.length % PAD_BLOCK)) % PAD_BLOCK)]);
    assert.throws(() => decodeBody(padded, 'x'), /invalid entry path or field|malformed/, bad);
  }
});

test('change times: written after the entries (tag 1, u64 each), read back; an old body has none', () => {
  const source = decodeBody(encodeBody(new Map([['A', Buffer.from('1')]])), 'x');
  const next = withChangeTimes(
    new Map([
      ['A', Buffer.from('1')],
      ['B', Buffer.from('22')],
    ]),
    source,
    ['B'],
    1_700_000_000_123,
  );
  const plain = encodeBody(next);
  const afterEntries = 9 + (2 + 1 + 4 + 1) + (2 + 1 + 4 + 2);
  assert.is(plain[afterEntries], 1, 'the tag');
  assert.is(plain.readBigUInt64LE(afterEntries + 1), 0n, 'A: unknown');
  assert.is(plain.readBigUInt64LE(afterEntries + 9), 1_700_000_000_123n);
  const back = decodeBody(plain, 'x');
  assert.equal([changeTime(back, 'A'), changeTime(back, 'B')], [0, 1_700_000_000_123]);
  // An old body: the byte after the entries is padding (zero).
  const old = decodeBody(body(1, [entry('A', Buffer.from('1'))]), 'x');
  assert.is(changeTime(old, 'A'), 0);
  // A map without times (a new container) is written without the block.
  assert.is(encodeBody(new Map([['A', Buffer.from('1')]]))[9 + 8], 0);
});

test('malformed body plaintexts are CONTAINER_CORRUPT naming the file', () => {
  const v = (s: string) => Buffer.from(s);
  const cases: Array<[string, Buffer]> = [
    ['empty', Buffer.alloc(0)],
    ['not a block multiple', Buffer.alloc(100)],
    ['count larger than the entries', body(2, [entry('A', v('1'))])],
    ['huge count', body(0xffffffff, [])],
    ['duplicate names', body(2, [entry('A', v('1')), entry('A', v('2'))])],
    ['names out of order', body(2, [entry('B', v('1')), entry('A', v('2'))])],
    ['invalid entry name', body(1, [entry('1A', v('1'))])],
    ['empty entry name', body(1, [entry('', v('1'))])],
    ['value length past the end', body(1, [entry('A', v('1'), 10_000)])],
    ['value over 64 KiB', body(1, [entry('A', Buffer.alloc(MAX_VALUE_BYTES + 1))])],
    [
      'non-zero padding',
      (() => {
        const b = body(1, [entry('A', v('1'))]);
        b[b.length - 1] = 1;
        return b;
      })(),
    ],
    [
      'no padding',
      (() => {
        const raw = body(1, [entry('A', Buffer.alloc(PAD_BLOCK - 10))], false);
        return raw;
      })(),
    ],
    ['a whole extra block of padding', Buffer.concat([body(1, [entry('A', v('1'))]), Buffer.alloc(PAD_BLOCK)])],
    [
      'change times cut short by the end of the body',
      body(1, [entry('A', Buffer.alloc(PAD_BLOCK - 14)), Buffer.from([1, 0, 0, 0])], false),
    ],
    ['change times of an empty container', body(0, [Buffer.from([1])])],
    ['a change time past 2^53', body(1, [entry('A', v('1')), Buffer.from([1]), Buffer.alloc(8, 0xff)])],
    ['an unknown block after the entries', body(1, [entry('A', v('1')), Buffer.from([3])])],
  ];
  for (const [what, plain] of cases) {
    const e = expectCode(() => decodeBody(plain, '/v/containers/x.stash'), 'CONTAINER_CORRUPT', what);
    assert.match(e.message, /\/v\/containers\/x\.stash/, what);
  }
});

test('authentic but malformed contact lists are VAULT_CORRUPT', async () => {
  const t = await newVault();
  const path = vaultPaths(t.dir).contacts;
  const header = readFileSync(path).subarray(0, 50);
  const nonce = header.subarray(26, 50);
  const good = {
    name: 'Bob',
    email: 'b@x.y',
    x25519: '11'.repeat(32),
    ed25519: '22'.repeat(32),
    fingerprint: 'x',
    addedAt: 'now',
  };
  const cases: Array<[string, string]> = [
    ['not JSON', '{"contacts": ['],
    ['null', 'null'],
    ['array', '[]'],
    ['no list', '{}'],
    ['list of numbers', '{"contacts":[1]}'],
    ['missing fields', '{"contacts":[{"name":"Bob"}]}'],
    ['fingerprint not matching the keys', JSON.stringify({ contacts: [good] })],
    ['key of wrong length', JSON.stringify({ contacts: [{ ...good, x25519: '11' }] })],
  ];
  for (const [what, text] of cases) {
    writeFileSync(path, Buffer.concat([header, sealWithNonce(Buffer.from(text), header, nonce, t.key)]));
    const e = expectCode(() => listContacts(t.dir, t.key), 'VAULT_CORRUPT', what);
    assert.ok(e.message.includes(path), what);
  }
});

test.run();
