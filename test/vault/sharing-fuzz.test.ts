/**
 * The version 2 parser and verifier under random damage: a real shared file
 * (Alice the owner, Bob a member who wrote the current revision) mutated at
 * random, in three ways: as it comes (flipped bytes, cuts, additions, wild
 * counts and counters); re-signed by the owner and the writer, so that the
 * damage reaches the checks behind the signatures; and with a damaged body
 * plaintext re-encrypted and re-signed, so that it reaches the body parser.
 *
 * Every outcome must be a successful read or a VaultError with one of the
 * documented codes, whose message holds no value: never another exception.
 * Bounded: a fixed number of cases from a fixed seed, and a time limit far
 * above what they take.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { open, sealWithNonce } from '../../src/vault/aead.js';
import { VaultError } from '../../src/vault/errors.js';
import { changeTime } from '../../src/vault/container-body.js';
import { wipe, wipeEntries } from '../../src/vault/index.js';
import { containerMembers, openSharedContentKey, readSharedEntries } from '../../src/vault/sharing/index.js';
import { signMembership, signWrite } from '../../src/vault/sharing/crypto.js';
import { decodeShared, headerLength, SIGNATURE_BYTES, STANZA_BYTES } from '../../src/vault/sharing/format.js';
import { cleanup, expectCode } from './vault-fixture.js';
import { read, threeMembers, write, type Person } from './sharing-people.js';
import { rng } from '../helpers/seeded-random.js';

test.after.each(cleanup);

const CASES = 600;
const TIME_LIMIT_MS = 60_000;
const ALLOWED = new Set([
  'CONTAINER_CORRUPT',
  'SHARE_BAD_SIGNATURE',
  'SHARE_MEMBERSHIP_INVALID',
  'SHARE_SIGNER_NOT_MEMBER',
  'SHARE_ROLLBACK',
  'SHARE_DIVERGED',
  'SHARE_NOT_RECIPIENT',
]);
const SECRET = 'fuzz-secret-value-0123456789';

function mutate(good: Buffer, rand: () => number): Buffer {
  const int = (n: number) => Math.floor(rand() * n);
  const b = Buffer.from(good);
  switch (int(7)) {
    case 0: // a few flipped bits anywhere
      for (let i = 1 + int(4); i > 0; i--) b[int(b.length)]! ^= 1 << int(8);
      return b;
    case 1: // cut
      return b.subarray(0, int(b.length));
    case 2: // extended
      return Buffer.concat([b, Buffer.alloc(1 + int(300), int(256))]);
    case 3: // the recipient count
      b[62] = int(256);
      return b;
    case 4: {
      // a u64 counter of the write block set to something wild
      const r = b[62]!;
      const w = 63 + STANZA_BYTES * r + SIGNATURE_BYTES;
      const at = w + 8 * [0, 1, 6, 7][int(4)]!; // revision, written at, a last write
      const wild = [0n, 1n, 2n ** 53n - 1n, 2n ** 53n, 2n ** 64n - 1n, BigInt(int(10))][int(6)]!;
      if (at + 8 <= b.length) b.writeBigUInt64LE(wild, at);
      return b;
    }
    case 5: // the epoch
      b.writeUInt32LE([0, 1, 2, 0xffffffff][int(4)]!, 26);
      return b;
    default:
      {
        // a random run of bytes overwritten
        const at = int(b.length);
        for (let i = at; i < Math.min(b.length, at + 1 + int(64)); i++) b[i] = int(256);
      }
      return b;
  }
}

/** Re-signs what can be re-signed: the owner's list (when it parses that far) and the write, by its writer if Alice or Bob. */
function resign(b: Buffer, owner: Person, members: Person[]): Buffer {
  if (b.length < 63) return b;
  const r = b[62]!;
  const s = 63 + STANZA_BYTES * r;
  if (s + SIGNATURE_BYTES > b.length) return b;
  signMembership(b.subarray(0, s), owner.secret.ed25519).copy(b, s);
  const writer = b.subarray(s + SIGNATURE_BYTES + 16, s + SIGNATURE_BYTES + 48);
  const who = members.find((m) => m.pub.ed25519.equals(writer));
  if (who && b.length >= s + SIGNATURE_BYTES + 48 + SIGNATURE_BYTES) {
    signWrite(b.subarray(0, b.length - SIGNATURE_BYTES), who.secret.ed25519).copy(b, b.length - SIGNATURE_BYTES);
  }
  return b;
}

/** Offset of the change time of entry `i` in a body plaintext (the block, tag 01 and 8 bytes per entry, follows the entries). */
function changeTimeAt(p: Buffer, i: number): number {
  assert.is(p.readUInt32LE(0), 0xffffffff, 'a body of version 2');
  const count = p.readUInt32LE(5);
  let o = 9;
  for (let e = 0; e < count; e++) o += 2 + p.readUInt16LE(o) + 4 + p.readUInt32LE(o + 2 + p.readUInt16LE(o));
  assert.is(p[o], 1, 'the fixture has change times');
  return o + 1 + 8 * i;
}

/**
 * `good` with its body plaintext changed by `change` (and its header by
 * `patchHeader`), encrypted under the real key, signed by the real writer.
 */
function rewriteBody(
  good: Buffer,
  key: Buffer,
  writer: Person,
  change: (plain: Buffer) => Buffer,
  patchHeader: (header: Buffer) => void = () => {},
): Buffer {
  const f = decodeShared(good, 'fuzz');
  const header = Buffer.from(f.headerBytes);
  patchHeader(header);
  const plain = open(f.body, f.headerBytes, f.write.bodyNonce, key)!;
  const p = change(Buffer.from(plain));
  wipe(plain);
  const out = Buffer.concat([header, sealWithNonce(p, header, f.write.bodyNonce, key), Buffer.alloc(SIGNATURE_BYTES)]);
  signWrite(out.subarray(0, out.length - SIGNATURE_BYTES), writer.secret.ed25519).copy(
    out,
    out.length - SIGNATURE_BYTES,
  );
  return out;
}

/** A damaged body plaintext (version 2): entries, the count or the marker, a change time, the padding. */
function badBody(good: Buffer, key: Buffer, writer: Person, rand: () => number): Buffer {
  const int = (n: number) => Math.floor(rand() * n);
  return rewriteBody(good, key, writer, (p) => {
    switch (int(4)) {
      case 0: // a few bytes anywhere
        for (let i = 1 + int(3); i > 0; i--) p[int(p.length)] = int(256);
        return p;
      case 1: // the count of a version-2 body (after its marker and version byte), or the marker
        p.writeUInt32LE([0, 1, 3, 4096, 4097, 0xffffffff][int(6)]!, rand() < 0.75 ? 5 : 0);
        return p;
      case 2:
        p.writeBigUInt64LE(
          [2n ** 53n - 1n, 8_640_000_000_000_001n, 2n ** 64n - 1n][int(3)]!,
          changeTimeAt(p, int(p.readUInt32LE(5))),
        );
        return p;
      default: // one padding block less or more
        return rand() < 0.5 ? p.subarray(0, p.length - 256) : Buffer.concat([p, Buffer.alloc(256)]);
    }
  });
}

/** What `stash ls` and `stash container members` show of a file that was read: every time must be a date. */
function shown(p: Person, key: Buffer): void {
  const e = readSharedEntries(p.dir, 'team', key);
  try {
    for (const name of e.keys()) new Date(changeTime(e, name)).toISOString();
  } finally {
    wipeEntries(e);
  }
  containerMembers(p.dir, 'team').writtenAt!.toISOString();
}

test(`${CASES} damaged shared files: each read succeeds or is refused with a documented code, never a crash`, async () => {
  const { alice, bob, carol, file } = await threeMembers();
  // Alice remembers the revision before the one that is damaged, so a damaged
  // file that passes the signatures is judged a later revision and read on.
  const record = join(alice.dir, 'shared', 'team.json');
  const goodRecord = readFileSync(record);
  write(bob, 'team', 'SECRET', SECRET);
  const good = readFileSync(file);
  const key = openSharedContentKey(alice.dir, 'team', alice.secret);
  const rand = rng(0x5eed17);
  const seen = new Map<string, number>();
  const started = Date.now();
  try {
    for (let i = 0; i < CASES; i++) {
      const kind = i % 3;
      const bytes =
        kind === 2
          ? badBody(good, key, bob, rand)
          : kind === 1
            ? resign(mutate(good, rand), alice, [alice, bob, carol])
            : mutate(good, rand);
      writeFileSync(file, bytes);
      let outcome = 'read';
      try {
        read(alice, 'team');
        shown(alice, key);
      } catch (err) {
        if (!(err instanceof VaultError)) {
          writeFileSync(join(alice.root, 'failing.stash'), bytes);
          throw new Error(`case ${i} (kind ${kind}): not a VaultError: ${(err as Error).stack}`);
        }
        assert.ok(ALLOWED.has(err.code), `case ${i} (kind ${kind}): unexpected code ${err.code}: ${err.message}`);
        assert.not.ok(
          err.message.includes(SECRET) || err.message.includes('alpha'),
          `case ${i}: a value in the message`,
        );
        outcome = err.code;
      }
      seen.set(outcome, (seen.get(outcome) ?? 0) + 1);
      writeFileSync(file, good);
      writeFileSync(record, goodRecord); // a damaged file accepted as newer must not decide the next case
      assert.ok(Date.now() - started < TIME_LIMIT_MS, `${i + 1} cases took over ${TIME_LIMIT_MS} ms`);
    }
  } finally {
    wipe(key);
  }
  console.log(`  outcomes: ${JSON.stringify(Object.fromEntries([...seen].sort()))} in ${Date.now() - started} ms`);
  assert.equal(read(alice, 'team').get('SECRET'), SECRET, 'the good file still reads');
});

test('a write time or change time that no date can hold, signed by a member, is CONTAINER_CORRUPT rather than a RangeError', async () => {
  const { alice, bob, file } = await threeMembers();
  const record = join(alice.dir, 'shared', 'team.json');
  const before = readFileSync(record);
  write(bob, 'team', 'B', 'bravo');
  const good = readFileSync(file);
  const key = openSharedContentKey(alice.dir, 'team', alice.secret);
  const f = decodeShared(good, file);
  const w = headerLength(f.membership.stanzas.length) - 72 - 8 * f.membership.stanzas.length;
  try {
    // Year +275760-09-13 is the last day a Date holds (8.64e15 ms); one millisecond later is not a clock.
    writeFileSync(
      file,
      rewriteBody(
        good,
        key,
        bob,
        (p) => p,
        (h) => h.writeBigUInt64LE(8_640_000_000_000_001n, w + 8),
      ),
    );
    writeFileSync(record, before);
    assert.match(
      expectCode(() => read(alice, 'team'), 'CONTAINER_CORRUPT', 'write time').message,
      /write time is out of range/,
    );
    writeFileSync(
      file,
      rewriteBody(good, key, bob, (p) => {
        p.writeBigUInt64LE(8_640_000_000_000_001n, changeTimeAt(p, 1));
        return p;
      }),
    );
    writeFileSync(record, before);
    assert.match(
      expectCode(() => read(alice, 'team'), 'CONTAINER_CORRUPT', 'change time').message,
      /change time of B is out of range/,
    );
    writeFileSync(
      file,
      rewriteBody(good, key, bob, (p) => {
        p.writeBigUInt64LE(8_640_000_000_000_000n, changeTimeAt(p, 1));
        return p;
      }),
    );
    writeFileSync(record, before);
    const e = readSharedEntries(alice.dir, 'team', key);
    assert.is(
      new Date(changeTime(e, 'B')).toISOString(),
      '+275760-09-13T00:00:00.000Z',
      'the last instant a Date holds is accepted',
    );
    wipeEntries(e);
    // The vault's own record of the last revision seen is held to the same bound.
    const doc = JSON.parse(before.toString());
    doc.seen.writtenAt = 8_640_000_000_000_001;
    writeFileSync(record, JSON.stringify(doc));
    writeFileSync(file, good);
    assert.match(
      expectCode(() => read(alice, 'team'), 'VAULT_CORRUPT', 'record').message,
      /seen.writtenAt is not a date/,
    );
  } finally {
    wipe(key);
  }
});

test.run();
