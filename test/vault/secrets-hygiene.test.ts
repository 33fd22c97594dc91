/**
 * Secrets stay where they belong: never on disk in the clear, never in error
 * messages, stacks or causes, and in sodium secure buffers while in use.
 */
import { readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { inspect } from 'node:util';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import {
  createContainer,
  identitySecret,
  readEntries,
  readEntry,
  secureAlloc,
  secureCopy,
  unlockVault,
  unwrapContentKey,
  vaultPaths,
  verifyVaultKey,
  wipe,
  wipeEntries,
  writeEntry,
} from '../../src/vault/index.js';
import { cleanup, newVault } from './vault-fixture.js';

test.after.each(cleanup);

const isSecure = (b: Buffer) => (b as Buffer & { secure?: boolean }).secure === true;

function allFiles(dir: string): Buffer[] {
  const out: Buffer[] = [];
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) out.push(...allFiles(p));
    else out.push(readFileSync(p));
  }
  return out;
}

/** Every rendering of an error a program or a person might see. */
function renderings(err: unknown): string {
  const e = err as Error;
  return [String(e), e.message, e.stack ?? '', inspect(e, { depth: 10, showHidden: true }), JSON.stringify(e)].join(
    '\n',
  );
}

function forms(b: Buffer): string[] {
  return [b.toString('hex'), b.toString('base64'), b.toString('latin1')];
}

test('no key, password or secret value reaches the disk in the clear', async () => {
  const v = await newVault('pa55-phrase-that-is-unique');
  createContainer(v.dir, v.key, 'prod');
  const ck = unwrapContentKey(v.dir, v.key, 'prod');
  const secret = Buffer.from('sk_live_TOTALLY_SECRET_VALUE_0123456789');
  writeEntry(v.dir, 'prod', ck, 'STRIPE_SECRET_ENTRY', secret);
  const sec = identitySecret(v.dir, v.key);
  const needles = [
    Buffer.from('pa55-phrase-that-is-unique'),
    secret,
    Buffer.from('STRIPE_SECRET_ENTRY'),
    Buffer.from(v.key),
    Buffer.from(ck),
    Buffer.from(sec.x25519),
    Buffer.from(sec.ed25519.subarray(0, 32)),
  ];
  for (const file of allFiles(v.dir)) {
    const text = file.toString('latin1');
    for (const n of needles) {
      assert.not.ok(file.includes(n), 'raw bytes found on disk');
      for (const f of forms(n)) assert.not.ok(text.includes(f), 'an encoding of a secret found on disk');
    }
  }
});

test('errors never carry passwords, keys or values', async () => {
  const v = await newVault('another-unique-pass');
  createContainer(v.dir, v.key, 'prod');
  createContainer(v.dir, v.key, 'other');
  const ck = unwrapContentKey(v.dir, v.key, 'prod');
  const wrongCk = unwrapContentKey(v.dir, v.key, 'other');
  writeEntry(v.dir, 'prod', ck, 'TOKEN', Buffer.from('value-that-must-not-leak'));
  const errors: unknown[] = [];
  const capture = async (fn: () => unknown) => {
    try {
      await fn();
      assert.unreachable('expected an error');
    } catch (err) {
      errors.push(err);
    }
  };
  await capture(() => unlockVault(v.dir, Buffer.from('another-unique-pass!')));
  await capture(() => readEntries(v.dir, 'prod', wrongCk));
  await capture(() => verifyVaultKey(v.dir, wrongCk));
  await capture(() => readEntry(v.dir, 'prod', ck, 'MISSING'));
  const path = vaultPaths(v.dir).container('prod');
  const good = readFileSync(path);
  const bad = Buffer.from(good);
  bad[bad.length - 1]! ^= 1;
  writeFileSync(path, bad);
  await capture(() => readEntries(v.dir, 'prod', ck));
  await capture(() => writeEntry(v.dir, 'prod', ck, 'TOKEN', Buffer.from('second-value-that-must-not-leak')));
  assert.is(errors.length, 6);
  const needles = ['another-unique-pass', 'value-that-must-not-leak', ...forms(v.key), ...forms(ck), ...forms(wrongCk)];
  for (const err of errors) {
    const text = renderings(err);
    for (const n of needles) assert.not.ok(text.includes(n), `error "${(err as Error).message}" leaks a secret`);
  }
});

test('every key and decrypted value handed out is a secure buffer', async () => {
  const v = await newVault();
  assert.ok(isSecure(v.key), 'vault key');
  createContainer(v.dir, v.key, 'c');
  const ck = unwrapContentKey(v.dir, v.key, 'c');
  assert.ok(isSecure(ck), 'content key');
  const sec = identitySecret(v.dir, v.key);
  assert.ok(isSecure(sec.x25519) && isSecure(sec.ed25519), 'identity secret keys');
  writeEntry(v.dir, 'c', ck, 'A', Buffer.from('1'));
  assert.ok(isSecure(readEntry(v.dir, 'c', ck, 'A')), 'a single value');
  assert.ok(isSecure(secureAlloc(8)) && isSecure(secureCopy(Buffer.from('x'))));
});

test('wipe and wipeEntries release the memory: later reads see nothing', async () => {
  const v = await newVault();
  createContainer(v.dir, v.key, 'c');
  const ck = unwrapContentKey(v.dir, v.key, 'c');
  writeEntry(v.dir, 'c', ck, 'A', Buffer.from('first'));
  writeEntry(v.dir, 'c', ck, 'B', Buffer.from('second'));
  const entries = readEntries(v.dir, 'c', ck);
  const a = entries.get('A')!;
  assert.is(a.toString(), 'first');
  wipeEntries(entries);
  assert.is(entries.size, 0);
  assert.is(a.length, 0, 'views into the freed buffer are detached');
  const copy = secureCopy(Buffer.from('abc'));
  wipe(copy);
  assert.is(copy.length, 0);
  const plain = Buffer.from('ordinary');
  wipe(plain);
  assert.ok(plain.equals(Buffer.alloc(8)), 'ordinary buffers are zeroed in place');
  wipe(undefined);
  wipe(null);
});

test.run();
