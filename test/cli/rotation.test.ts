/**
 * Identity rotation end to end (issue 29, item 7): three real vaults driven
 * through `node bin/stash.js` child processes and a real key server on
 * loopback for the first key exchange. Alice owns `team`, shared with Bob;
 * Bob owns `bobs`, shared with Alice; both files live in one shared folder.
 * Alice rotates; Bob takes her new key from the signed statement, with no
 * fingerprint, and opens `team` as Alice re-sealed it, while his own `bobs`
 * is re-sealed to her new key. Forged, tampered and unknown statements are
 * refused with their own exit status and one `stash:` line.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createRequire } from 'node:module';
import { identityPublic, identitySecret, unlockVault, wipe } from '../../src/vault/index.js';
import { generateKeyPairs, wipeKeyPairs } from '../../src/vault/identity.js';
import { makeStatement, parseStatement, statementText } from '../../src/vault/rotation/index.js';
import { tempDir, type TestServer } from '../keyserver/harness.js';
import { cliEnv, type CliEnv } from './harness.js';
import { startPlainServer } from './keyserver-harness.js';
import { exchange, fingerprintOf, ok, refused } from './members.js';

const sodium = createRequire(import.meta.url)('sodium-native');

let server: TestServer;
let alice: CliEnv;
let bob: CliEnv;
let mallory: CliEnv;
let root: string;
let removeRoot: () => void = () => {};
/** A copy of Alice's old secret Ed25519 key: what an attacker who stole it holds. */
let stolen: Buffer | null = null;

test.before(async () => {
  server = await startPlainServer();
  [alice, bob, mallory] = [cliEnv(), cliEnv(), cliEnv()];
  for (const t of [alice, bob, mallory]) await t.initVault();
  const dir = tempDir('rotation');
  root = dir.path;
  removeRoot = dir.remove;
});

test.after(async () => {
  wipe(stolen);
  for (const t of [alice, bob, mallory]) await t?.dispose();
  await server?.stop();
  removeRoot();
});

test('Alice rotates; Bob accepts through the signed statement without a fingerprint and opens what she re-sealed', async () => {
  await exchange(server, alice, 'alice@example.test', bob, 'alice');
  await exchange(server, bob, 'bob@example.test', alice, 'bob');
  const teamFile = join(root, 'team.stash');
  const bobsFile = join(root, 'bobs.stash');
  await ok(alice, ['container', 'create', 'team']);
  await ok(alice, ['set', 'team', 'API_KEY'], 'sk-alice-1');
  await ok(alice, ['container', 'share', 'team', 'bob']);
  await ok(alice, ['container', 'export', 'team', teamFile]);
  await ok(alice, ['container', 'link', teamFile, '--name', 'team']);
  await ok(bob, ['container', 'link', teamFile]);
  await ok(bob, ['container', 'create', 'bobs']);
  await ok(bob, ['set', 'bobs', 'DB'], 'pg-bob-1');
  await ok(bob, ['container', 'share', 'bobs', 'alice']);
  await ok(bob, ['container', 'export', 'bobs', bobsFile]);
  await ok(bob, ['container', 'link', bobsFile, '--name', 'bobs']);
  await ok(alice, ['container', 'link', bobsFile]);
  assert.is((await ok(bob, ['get', 'team', 'API_KEY'])).stdout, 'sk-alice-1');
  assert.is((await ok(alice, ['get', 'bobs', 'DB'])).stdout, 'pg-bob-1');

  // What a thief of Alice's old key would hold.
  const vaultKey = await unlockVault(alice.vault, Buffer.from(alice.password));
  const secret = identitySecret(alice.vault, vaultKey);
  stolen = secret.ed25519;
  wipe(secret.x25519);
  wipe(vaultKey);
  const oldFp = await fingerprintOf(alice);

  // Off a terminal, rotate needs --yes: nothing changes without it.
  await refused(alice, ['vault', 'identity', 'rotate'], 64, /confirm at a terminal, or give --yes/);
  assert.is(await fingerprintOf(alice), oldFp);
  const rotated = JSON.parse((await ok(alice, ['vault', 'identity', 'rotate', '--yes', '--json'])).stdout) as Record<
    string,
    any
  >;
  assert.is(rotated.oldFingerprint, oldFp);
  assert.is(rotated.fingerprint, await fingerprintOf(alice));
  assert.is.not(rotated.fingerprint, oldFp);
  assert.equal([rotated.finished, rotated.resumed, rotated.failed], [true, false, []]);
  assert.equal(
    rotated.resealed.map((c: { name: string }) => c.name),
    ['team'],
  );
  assert.equal(
    rotated.memberOf.map((m: Record<string, string>) => [m.name, m.owner]),
    [['bobs', 'bob']],
  );
  assert.match(rotated.memberOf[0].action, /accept-rotation/);
  assert.not.ok(
    readFileSync(join(alice.vault, 'identity.json'), 'utf8').includes('retiring'),
    'the old secret keys left the vault',
  );
  // Alice still reads what she owns; the container is hers under the new key.
  assert.is((await ok(alice, ['get', 'team', 'API_KEY'])).stdout, 'sk-alice-1');
  // Bob, before accepting, refuses the re-sealed file: another owner than the one he pinned.
  await refused(bob, ['get', 'team', 'API_KEY'], 81, /accept-rotation/);

  const statementFile = join(root, 'alice.rotation');
  assert.match(
    (await ok(alice, ['vault', 'identity', 'statement', '--out', statementFile])).stdout,
    /^Wrote the rotation statement from /,
  );
  await refused(alice, ['vault', 'identity', 'statement', '--out', statementFile], 73, /exists already/);
  const text = readFileSync(statementFile, 'utf8');
  assert.is(text.trim(), (await ok(alice, ['vault', 'identity', 'statement'])).stdout.trim());

  // Mallory never had Alice's key: the statement proves nothing to her.
  await refused(
    mallory,
    ['vault', 'contact', 'accept-rotation', statementFile],
    66,
    /not the key of any of your contacts/,
  );

  // Bob accepts: no terminal, no --fingerprint, no prompt.
  const accepted = JSON.parse(
    (await ok(bob, ['vault', 'contact', 'accept-rotation', statementFile, '--json'])).stdout,
  ) as Record<string, any>;
  assert.equal(
    [accepted.contact.name, accepted.contact.fingerprint, accepted.oldFingerprint, accepted.already],
    ['alice', rotated.fingerprint, oldFp, false],
  );
  assert.equal(accepted.repinned, ['team']);
  assert.equal(
    accepted.resealed.map((c: { name: string }) => c.name),
    ['bobs'],
  );
  assert.is(
    (await ok(bob, ['get', 'team', 'API_KEY'])).stdout,
    'sk-alice-1',
    'Bob opens the container Alice re-sealed',
  );
  await ok(bob, ['set', 'team', 'FROM_BOB'], 'b-2');
  assert.is((await ok(alice, ['get', 'team', 'FROM_BOB'])).stdout, 'b-2');
  // Bob's own container is sealed to Alice's new key: she opens it again.
  assert.is((await ok(alice, ['get', 'bobs', 'DB'])).stdout, 'pg-bob-1');
  const contact = JSON.parse((await ok(bob, ['vault', 'contact', 'show', 'alice', '--json'])).stdout) as Record<
    string,
    string
  >;
  assert.is(contact.fingerprint, rotated.fingerprint);
  assert.equal(
    (contact as unknown as { rotatedFrom: Array<{ fingerprint: string }> }).rotatedFrom.map((r) => r.fingerprint),
    [oldFp],
  );
  assert.match(
    (await ok(bob, ['vault', 'contact', 'show', 'alice'])).stdout,
    new RegExp(`Rotated from ${oldFp} \\(statement accepted `),
  );

  // The same statement again changes nothing and succeeds; from standard input too.
  assert.match((await ok(bob, ['vault', 'contact', 'accept-rotation', '-'], text)).stdout, /^Already accepted: alice /);
});

test('tampered, forged and conflicting statements are refused and change nothing', async () => {
  const text = readFileSync(join(root, 'alice.rotation'), 'utf8').trim();
  const s = parseStatement(text);
  const before = readFileSync(join(bob.vault, 'contacts.stash'));
  const write = (name: string, content: string | Buffer) => {
    const p = join(root, name);
    writeFileSync(p, content);
    return p;
  };

  // One byte of the new key changed: neither signature holds.
  const tampered = Buffer.from(s.bytes);
  tampered[100] = tampered[100]! ^ 0x01;
  await refused(
    bob,
    ['vault', 'contact', 'accept-rotation', write('tampered', `stash-rotation-v1:${tampered.toString('base64url')}\n`)],
    65,
    /not a valid rotation statement/,
  );
  // Alice's old key named as the signer, but the signature is another key's.
  const forged = Buffer.from(s.bytes);
  const other = generateKeyPairs();
  const msg = Buffer.concat([Buffer.from('stash-identity-rotation-v1\0', 'latin1'), forged.subarray(0, 147)]);
  sodium.crypto_sign_detached(forged.subarray(147, 211), msg, other.secret.ed25519);
  await refused(
    bob,
    ['vault', 'contact', 'accept-rotation', write('forged', `stash-rotation-v1:${forged.toString('base64url')}`)],
    65,
    /not signed by the old key/,
  );
  await refused(
    bob,
    ['vault', 'contact', 'accept-rotation', write('garbage', 'hello\n')],
    65,
    /does not start with "stash-rotation-v1:"/,
  );
  await refused(bob, ['vault', 'contact', 'accept-rotation', join(root, 'missing')], 66, /no such file/);
  // Read with a bound: a FIFO is refused at once (not waited on), a large file without reading it all.
  const fifo = join(root, 'statement.fifo');
  assert.is(spawnSync('mkfifo', [fifo]).status, 0, 'mkfifo');
  const r = await bob.run(['vault', 'contact', 'accept-rotation', fifo], {
    env: { STASH_PASSWORD_FILE: bob.pwFile },
    timeoutMs: 10_000,
  });
  assert.is(r.code, 65, `a FIFO: ${r.code} ${r.stderr}`);
  assert.match(r.stderr, /^stash: .*statement\.fifo is not a regular file/);
  await refused(
    bob,
    ['vault', 'contact', 'accept-rotation', write('big', Buffer.alloc(8 << 20, 0x41))],
    65,
    /8388608 bytes is far longer than a statement/,
  );
  await refused(
    bob,
    ['vault', 'contact', 'accept-rotation', '-'],
    65,
    /4097 bytes is far longer than a statement/,
    'A'.repeat(100_000),
  );

  // The thief of Alice's old key signs a statement to a key of their own: a second successor of one key.
  const conflicting = statementText(makeStatement(s.old, other, stolen!, other.secret.ed25519));
  wipeKeyPairs(other);
  await refused(
    bob,
    ['vault', 'contact', 'accept-rotation', write('conflict', conflicting)],
    65,
    /already rotated from .* two different statements signed by one key/,
  );
  assert.ok(readFileSync(join(bob.vault, 'contacts.stash')).equals(before), "Bob's contacts were not rewritten");
  assert.is((await ok(bob, ['get', 'team', 'API_KEY'])).stdout, 'sk-alice-1');
  assert.is(
    identityPublic(alice.vault).fingerprint,
    JSON.parse((await ok(bob, ['vault', 'contact', 'show', 'alice', '--json'])).stdout).fingerprint,
  );
});

test('identity statement refuses a statement in identity.json that does not hand over to the vault key', async () => {
  const path = join(alice.vault, 'identity.json');
  const before = readFileSync(path, 'utf8');
  const doc = JSON.parse(before) as { rotations: string[] };
  const real = parseStatement(doc.rotations[doc.rotations.length - 1]!);
  // Someone who can write the vault folder and holds Alice's old key swaps in a statement to a key of theirs.
  const theirs = generateKeyPairs();
  const swapped = statementText(makeStatement(real.old, theirs, stolen!, theirs.secret.ed25519));
  wipeKeyPairs(theirs);
  try {
    writeFileSync(path, JSON.stringify({ ...doc, rotations: [...doc.rotations.slice(0, -1), swapped] }));
    await refused(alice, ['vault', 'identity', 'statement'], 65, /hands over to .*, not to this vault's key/);
    await refused(alice, ['vault', 'identity', 'statement', '--json'], 65, /not sent out/);
    // A list that does not chain: a statement from some other key put before the real one.
    const stray = generateKeyPairs();
    const other = generateKeyPairs();
    const first = statementText(makeStatement(stray, other, stray.secret.ed25519, other.secret.ed25519));
    wipeKeyPairs(stray);
    wipeKeyPairs(other);
    writeFileSync(path, JSON.stringify({ ...doc, rotations: [first, ...doc.rotations] }));
    await refused(alice, ['vault', 'identity', 'statement'], 65, /do not follow on/);
  } finally {
    writeFileSync(path, before);
  }
  assert.match((await ok(alice, ['vault', 'identity', 'statement'])).stdout, /^stash-rotation-v1:/);
});

test.run();
