/**
 * Teams end to end: three real vaults driven through `node bin/stash.js`
 * child processes, each with its own agent, and a real key server on
 * loopback. Alice and Bob exchange keys with publish / contact receive (both
 * ways, fingerprints checked); Alice shares a container with Bob through a
 * "repository" (a folder each of them links, with git pull / push played by
 * copying the file between their checkouts). Carol is not a recipient. Every
 * refusal has its own exit status and one `stash: ...` line, never a stack.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { copyFileSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { AgentClient } from '../../src/agent/client.js';
import { agentEndpoint } from '../../src/agent/paths.js';
import { randomBytes } from 'node:crypto';
import { identitySecret, unlockVault, wipe, wipeEntries } from '../../src/vault/index.js';
import { openSharedContentKey, readSharedEntries } from '../../src/vault/sharing/index.js';
import { signWrite } from '../../src/vault/sharing/crypto.js';
import { decodeShared, headerLength, SIGNATURE_BYTES, STANZA_BYTES } from '../../src/vault/sharing/format.js';
import { assembleFile } from '../../src/vault/sharing/revisions.js';
import { tempDir, type TestServer } from '../keyserver/harness.js';
import { cliEnv, type CliEnv } from './harness.js';
import { startPlainServer } from './keyserver-harness.js';
import { exchange, fingerprintOf, ok, refused } from './members.js';

let server: TestServer;
let alice: CliEnv;
let bob: CliEnv;
let carol: CliEnv;
let root: string;
let removeRoot: () => void = () => {};
/** Alice's and Bob's checkouts of the team repository. */
let aliceFile: string;
let bobFile: string;

const pull = () => copyFileSync(aliceFile, bobFile);
const push = () => copyFileSync(bobFile, aliceFile);

test.before(async () => {
  server = await startPlainServer();
  [alice, bob, carol] = [cliEnv(), cliEnv(), cliEnv()];
  for (const t of [alice, bob, carol]) await t.initVault();
  const dir = tempDir('teams');
  root = dir.path;
  removeRoot = dir.remove;
  mkdirSync(join(root, 'alice-repo'));
  mkdirSync(join(root, 'bob-repo'));
  aliceFile = join(root, 'alice-repo', 'team.stash');
  bobFile = join(root, 'bob-repo', 'team.stash');
});

test.after(async () => {
  for (const t of [alice, bob, carol]) await t?.dispose();
  await server?.stop();
  removeRoot();
});

test('keys exchanged both ways through the key server; Alice shares, Bob reads with his own password, writes; Alice reads', async () => {
  await exchange(server, alice, 'alice@example.test', bob, 'alice');
  await exchange(server, bob, 'bob@example.test', alice, 'bob');
  await exchange(server, alice, 'alice@example.test', carol, 'alice'); // Carol trusts Alice, but Alice never shares with her

  await ok(alice, ['container', 'create', 'team']);
  await ok(alice, ['set', 'team', 'API_KEY'], 'sk-alice-1');
  const share = await ok(alice, ['container', 'share', 'team', 'bob']);
  assert.match(
    share.stdout,
    /^team is now a shared container \(file format 2\), owned by you\.\nShared team with bob <bob@example\.test> \(fingerprint /,
  );
  assert.match((await ok(alice, ['container', 'export', 'team', aliceFile])).stdout, /^Wrote version 1 of team to /);
  assert.match(
    (await ok(alice, ['container', 'link', aliceFile, '--name', 'team'])).stdout,
    /the copy in the vault, version 1, was removed/,
  );
  pull();

  await ok(bob, ['vault', 'sessions', 'lock-all']);
  assert.match(
    (await ok(bob, ['container', 'link', bobFile])).stdout,
    /^Linked team to .*bob-repo\/team\.stash \(version 1\)\./,
  );
  const got = await ok(bob, ['get', 'team', 'API_KEY']);
  assert.is(got.stdout, 'sk-alice-1', 'Bob opened it with his identity, unlocked by his own password');
  await ok(bob, ['set', 'team', 'DB_PASSWORD'], 'pg-bob-2');
  push();
  assert.is((await ok(alice, ['get', 'team', 'DB_PASSWORD'])).stdout, 'pg-bob-2');
  const env = await ok(alice, ['env', 'team', '--', 'sh', '-c', 'printf %s "$API_KEY/$DB_PASSWORD"']);
  assert.is(env.stdout, 'sk-alice-1/pg-bob-2');
  // Change times survive the share and Bob's signed write; ls prints no value.
  const ls = await ok(alice, ['ls', 'team', '--json']);
  const rows = JSON.parse(ls.stdout) as Array<{ name: string; size: number; changedAt: string | null }>;
  assert.equal(
    rows.map((r) => [r.name, r.size]),
    [
      ['API_KEY', 10],
      ['DB_PASSWORD', 8],
    ],
  );
  assert.ok(
    rows.every((r) => r.changedAt !== null),
    ls.stdout,
  );
  assert.ok(
    Date.parse(rows[0]!.changedAt!) <= Date.parse(rows[1]!.changedAt!),
    'API_KEY was set before Bob wrote DB_PASSWORD',
  );
  assert.not.ok(ls.stdout.includes('sk-alice-1') || ls.stdout.includes('pg-bob-2'));

  const members = JSON.parse((await ok(alice, ['container', 'members', 'team', '--json'])).stdout) as Record<
    string,
    any
  >;
  assert.equal([members.shared, members.version, members.link], [true, 2, aliceFile]);
  assert.equal(
    members.members.map((m: any) => [m.name, m.owner, m.you, m.lastWrite]),
    [
      [null, true, true, 1],
      ['bob', false, false, 2],
    ],
  );
  assert.equal(
    [members.writer.name, members.writer.fingerprint],
    ['bob', await fingerprintOf(bob)],
    'Bob signed the current version',
  );
  const text = (await ok(alice, ['container', 'members', 'team'])).stdout;
  assert.match(text, /^Version 2 was written by bob \([0-9A-Z-]{29}\) at \d{4}-/m);
  const list = (await ok(bob, ['container', 'list'])).stdout;
  assert.match(list, /^team +\d+ +[\d-]+ [\d:]+ +shared, 2 members, linked to .*bob-repo\/team\.stash$/m);
});

test('Carol, not a recipient, cannot open the file; a file re-signed by Carol is refused by Alice and Bob', async () => {
  await refused(carol, ['container', 'link', aliceFile], 85, /you are not a recipient of .*team\.stash/);
  await refused(carol, ['container', 'import', aliceFile], 85, /you are not a recipient/);
  const good = readFileSync(aliceFile);
  const f = decodeShared(good, aliceFile);
  const r = f.membership.stanzas.length;
  const key = await unlockVault(carol.vault, Buffer.from(carol.password));
  const secret = identitySecret(carol.vault, key);
  const forged = Buffer.from(good);
  const carolPublic = Buffer.from(secret.ed25519.subarray(32));
  carolPublic.copy(forged, headerLength(r) - 72 - 8 * r + 16); // the writer field
  signWrite(forged.subarray(0, forged.length - SIGNATURE_BYTES), secret.ed25519).copy(
    forged,
    forged.length - SIGNATURE_BYTES,
  );
  wipe(secret.x25519);
  wipe(secret.ed25519);
  wipe(key);
  writeFileSync(aliceFile, forged);
  writeFileSync(bobFile, forged);
  await refused(
    alice,
    ['get', 'team', 'API_KEY'],
    82,
    /is signed by key [0-9a-f]{16}, who is not one of its recipients/,
  );
  await refused(bob, ['get', 'team', 'API_KEY'], 82, /who is not one of its recipients/);
  writeFileSync(aliceFile, good);
  writeFileSync(bobFile, good);
});

test('tampering: recipient list, sealed key, truncated body, an older version replayed: each its own status', async () => {
  const good = readFileSync(aliceFile);
  const r = decodeShared(good, aliceFile).membership.stanzas.length;
  const carolX25519 = Buffer.from(
    (JSON.parse((await ok(carol, ['vault', 'identity', 'show', '--json'])).stdout) as { x25519: string }).x25519,
    'hex',
  );
  const cases: Array<[string, (b: Buffer) => Buffer, number, RegExp]> = [
    [
      'recipient list changed',
      (b) => {
        carolX25519.copy(b, 63 + STANZA_BYTES);
        return b;
      },
      81,
      /recipient list is not signed by its owner/,
    ],
    [
      'sealed keys swapped',
      (b) => {
        const a = Buffer.from(b.subarray(63 + 64, 63 + STANZA_BYTES));
        b.copy(b, 63 + 64, 63 + STANZA_BYTES + 64, 63 + 2 * STANZA_BYTES);
        a.copy(b, 63 + STANZA_BYTES + 64);
        return b;
      },
      81,
      /not signed by its owner/,
    ],
    ['truncated body', (b) => b.subarray(0, b.length - 100), 80, /changed after it was written/],
    [
      'truncated inside the header',
      (b) => b.subarray(0, headerLength(r) - 1),
      65,
      /damaged or was modified: the file is truncated/,
    ],
  ];
  for (const [what, change, status, message] of cases) {
    writeFileSync(aliceFile, change(Buffer.from(good)));
    copyFileSync(aliceFile, bobFile);
    await refused(alice, ['get', 'team', 'API_KEY'], status, message);
    await refused(bob, ['get', 'team', 'API_KEY'], status, message);
    writeFileSync(aliceFile, good);
    pull();
    assert.is((await ok(alice, ['get', 'team', 'API_KEY'])).stdout, 'sk-alice-1', `${what}: the good file opens again`);
  }
  // An older version replayed over a newer one.
  await ok(alice, ['set', 'team', 'API_KEY'], 'sk-alice-3');
  writeFileSync(aliceFile, good);
  await refused(
    alice,
    ['get', 'team', 'API_KEY'],
    83,
    /holds version 2 .*an older version of container team: this vault already saw version 3/,
  );
  await refused(alice, ['set', 'team', 'X'], 83, /older version/, 'x');
  assert.ok(readFileSync(aliceFile).equals(good), 'the refused write changed nothing');
});

test('concurrent edits are detected and refused, never silently lost; merge keeps both, accept takes a version on purpose', async () => {
  // Back to Alice's version 3, as if nothing had happened; Bob has version 2 in his checkout.
  await ok(alice, ['container', 'accept', 'team']);
  await ok(alice, ['set', 'team', 'FROM_ALICE'], 'a');
  await ok(bob, ['set', 'team', 'FROM_BOB'], 'b'); // both wrote version 3 from version 2
  const alices = join(root, 'alices-version.stash'); // what `git show :2:team.stash` gives Alice below
  copyFileSync(aliceFile, alices);
  const bobs = readFileSync(bobFile);
  pull(); // Bob takes Alice's side of the conflict
  await refused(bob, ['get', 'team', 'FROM_ALICE'], 84, /neither contains the other's changes.*nothing is lost yet/);
  await refused(bob, ['set', 'team', 'X'], 84, /stash container accept team/, 'x');
  writeFileSync(bobFile, bobs);
  push(); // and Alice is offered Bob's
  await refused(
    alice,
    ['get', 'team', 'FROM_BOB'],
    84,
    /this vault last saw version 3 \(written by you.*stash container merge team FILE/,
  );
  // Alice keeps both: Bob's version is in place, hers in a file.
  const merged = await ok(alice, ['container', 'merge', 'team', alices]);
  assert.match(
    merged.stdout,
    /^Merged .*alices-version\.stash into team: version 4, signed by you; every member accepts it as a later version\.\nTaken from .*: FROM_ALICE\./,
  );
  assert.is((await ok(alice, ['get', 'team', 'FROM_BOB'])).stdout, 'b');
  pull();
  assert.is((await ok(bob, ['get', 'team', 'FROM_ALICE'])).stdout, 'a');
  assert.is((await ok(bob, ['get', 'team', 'FROM_BOB'])).stdout, 'b');
});

test("unshare bob: the key is rotated; Bob's copy of the previous version still opens, the new version does not", async () => {
  const before = readFileSync(aliceFile);
  const id = decodeShared(before, aliceFile).membership.containerId;
  await ok(alice, ['get', 'team', 'API_KEY']); // cached in Alice's agent
  const agent = await AgentClient.connect(agentEndpoint({ STASH_SESSION_AGENT_DIR: alice.dir }));
  try {
    const oldKey = (await agent.get(id))!.key;
    const r = await ok(alice, ['container', 'unshare', 'team', 'bob']);
    assert.match(
      r.stdout,
      /^Removed bob from team and rotated its content key \(now version 5\)\.\nbob can no longer read later versions, but keeps what they already read: every value up to version 4,\nand any copy of the file they have, which still opens with their key\./,
    );
    // unshare dropped the old key; its offboarding list then read the container with the new one.
    const held = await agent.get(id);
    assert.ok(held === null || !held.key.equals(oldKey), 'the old key is no longer in the agent');
    assert.is(
      (await ok(alice, ['get', 'team', 'API_KEY'])).stdout,
      'sk-alice-1',
      'version 3 (sk-alice-3) was given up by accept',
    );
    const newKey = (await agent.get(id))!.key;
    assert.not.ok(newKey.equals(oldKey), 'the rotated content key differs from the old one');
    const commit = (b: Buffer) => decodeShared(b, aliceFile).membership.commitment;
    assert.not.ok(commit(readFileSync(aliceFile)).equals(commit(before)), 'and so does its commitment in the header');
  } finally {
    agent.close();
  }
  assert.is((await ok(bob, ['get', 'team', 'FROM_ALICE'])).stdout, 'a', 'Bob has not pulled: his copy still opens');
  pull();
  await refused(
    bob,
    ['get', 'team', 'API_KEY'],
    85,
    /you are not a recipient .*version 5.*Copies of earlier versions you hold still open/,
  );
  writeFileSync(bobFile, before); // git checkout HEAD~1 -- team.stash
  assert.is(
    (await ok(bob, ['get', 'team', 'API_KEY'])).stdout,
    'sk-alice-1',
    'the previous version still opens for Bob',
  );
  await refused(bob, ['container', 'share', 'team', 'alice'], 77, /only the owner of team/);
  // A write by Bob on the old recipient list, pushed: Alice has seen the new list.
  await ok(bob, ['set', 'team', 'SNEAKY'], 'x');
  push();
  await refused(
    alice,
    ['get', 'team', 'API_KEY'],
    83,
    /recipient list \(epoch 1\) is older than the one this vault already saw \(epoch 2\)/,
  );
});

test('help lists the sharing commands; a private container exports for this vault only; unknown contacts are clear errors', async () => {
  await ok(alice, ['container', 'create', 'solo']);
  // A private export is a copy only Alice's vault can open (backup.test has the round trip): Bob is refused.
  const solo = join(root, 'solo.stash');
  await ok(alice, ['container', 'export', 'solo', solo]);
  await refused(
    bob,
    ['container', 'import', solo],
    77,
    /is a private container of another vault: only the vault that exported it can import it/,
  );
  await refused(alice, ['container', 'share', 'solo', 'nobody'], 66, /no contact named "nobody"/);
  await refused(alice, ['container', 'unshare', 'solo', 'bob'], 1, /container solo is not shared with anyone/);
  const m = await ok(alice, ['container', 'members', 'solo']);
  assert.match(m.stdout, /^solo is private: only you \([0-9A-Z-]{29}\) can open it/);
  const unlinked = await ok(bob, ['container', 'rm', 'team']);
  assert.match(unlinked.stdout, /^Unlinked team; the file .*bob-repo\/team\.stash is kept\.\n$/);
  assert.ok(readFileSync(bobFile).length > 0);
});

test("a member's version numbered 2^53-1 is refused naming them (65), and the owner still removes them by fingerprint", async () => {
  await ok(alice, ['container', 'create', 'ops']);
  await ok(alice, ['set', 'ops', 'TOKEN'], 'tok-1');
  await ok(alice, ['container', 'share', 'ops', 'bob']);
  const file = join(root, 'alice-repo', 'ops.stash');
  await ok(alice, ['container', 'export', 'ops', file]);
  await ok(alice, ['container', 'link', file, '--name', 'ops']);
  await ok(bob, ['container', 'link', file, '--name', 'ops']);
  // Bob, with a client of his own, signs a version with every counter at the largest exact number.
  const vaultKey = await unlockVault(bob.vault, Buffer.from(bob.password));
  const secret = identitySecret(bob.vault, vaultKey);
  const contentKey = openSharedContentKey(bob.vault, 'ops', secret);
  const entries = readSharedEntries(bob.vault, 'ops', contentKey);
  const current = readFileSync(file);
  const f = decodeShared(current, file);
  const max = Number.MAX_SAFE_INTEGER;
  const write = {
    revision: max,
    writtenAt: Date.now(),
    writer: Buffer.from(secret.ed25519.subarray(32)),
    lastWrites: f.membership.stanzas.map(() => max),
    bodyNonce: randomBytes(24),
  };
  writeFileSync(
    file,
    assembleFile(
      current.subarray(0, f.membershipBytes.length + SIGNATURE_BYTES),
      f.membership.stanzas.length,
      write,
      contentKey,
      entries,
      secret.ed25519,
    ),
  );
  wipeEntries(entries);
  for (const k of [contentKey, secret.x25519, secret.ed25519, vaultKey]) wipe(k);

  const bobFp = await fingerprintOf(bob);
  await refused(
    alice,
    ['get', 'ops', 'TOKEN'],
    65,
    new RegExp(
      `version ${max} of ops, written by ${bobFp}, leaves no room for later versions.*stash container unshare ops ${bobFp}`,
    ),
  );
  await refused(alice, ['set', 'ops', 'X'], 65, /leaves no room for later versions/, 'x');
  await refused(alice, ['container', 'share', 'ops', 'bob'], 65, /leaves no room/);
  const r = await ok(alice, ['container', 'unshare', 'ops', bobFp]);
  assert.match(r.stdout, new RegExp(`^Removed ${bobFp} from ops and rotated its content key`));
  assert.is((await ok(alice, ['get', 'ops', 'TOKEN'])).stdout, 'tok-1');
  await ok(alice, ['set', 'ops', 'X'], 'x');
  assert.is((await ok(alice, ['get', 'ops', 'X'])).stdout, 'x');
  await refused(bob, ['get', 'ops', 'TOKEN'], 85, /you are not a recipient/);
});

test.run();
