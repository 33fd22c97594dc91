/**
 * A wrong password and a tampered file each give a clear error, a specific
 * exit status, and change nothing on disk (every byte of the vault is
 * compared before and after).
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { needFacility } from '../helpers/facility.js';
import { cliEnv, havePty, sharedCliEnv, snapshot, type CliEnv } from './harness.js';

function assertUnchanged(before: Map<string, Buffer>, t: CliEnv, what: string): void {
  const after = snapshot(t.vault);
  assert.equal([...after.keys()].sort(), [...before.keys()].sort(), `${what}: same files`);
  for (const [path, bytes] of before) assert.ok(after.get(path)!.equals(bytes), `${what}: ${path} unchanged`);
}

// The tests that read and tamper with a container of their own share one vault and agent; the one that
// tampers with vault.json (and reads the whole container list) makes its own.
const shared = sharedCliEnv();
test.after(() => shared.dispose());

/** Container `name` with entries A and B, every key forgotten: in the shared vault, or in a new one. */
async function setup(name = 'work', own = false): Promise<CliEnv> {
  const t = own ? cliEnv() : await shared.fresh([name]);
  if (own) await t.initVault([name]);
  for (const [k, v] of [
    ['A', 'alpha'],
    ['B', 'bravo'],
  ]) {
    const r = await t.run(['set', name, k!, '--password-file', t.pwFile], { input: v! });
    assert.is(r.code, 0, r.stderr);
  }
  await t.run(['vault', 'sessions', 'lock-all']);
  return t;
}

test('a wrong password: exit 77, a clear message, nothing written, nothing cached', async () => {
  const t = await setup('wrong');
  const wrong = join(t.home, 'wrong');
  writeFileSync(wrong, 'Tr0ub4dor&3\n', { mode: 0o600 });
  const before = snapshot(t.vault);
  for (const args of [
    ['get', 'wrong', 'A'],
    ['open', 'wrong'],
    ['container', 'create', 'other'],
    ['vault', 'passwd', '--new-password-file', wrong],
  ]) {
    const r = await t.run([...args, '--password-file', wrong], { input: 'new value' });
    assert.is(r.code, 77, `${args.join(' ')}: ${r.stderr}`);
    assert.is(r.stderr, `stash: wrong password for the vault at ${t.vault}\n`);
    assert.is(r.stdout, '');
  }
  const set = await t.run(['set', 'wrong', 'A', '--password-file', wrong], { input: 'overwritten' });
  assert.is(set.code, 77);
  assertUnchanged(before, t, 'after wrong passwords');
  const list = await t.run(['vault', 'sessions', '--json']);
  assert.equal(JSON.parse(list.stdout).sessions, [], 'no key was cached');
  const right = await t.run(['get', 'wrong', 'A', '--password-file', t.pwFile]);
  assert.is(right.stdout, 'alpha', 'the right password still works');
});

test('a wrong password on a terminal: three tries, then exit 77', async () => {
  if (!needFacility(havePty(), 'pseudo-terminal', '/usr/bin/python3 with the pty module is missing')) return;
  const t = await setup('asked');
  const before = snapshot(t.vault);
  const ask = 'Password for the vault at .*: ';
  const r = t.pty(
    ['get', 'asked', 'A'],
    [
      [ask, 'nope1'],
      [ask, 'nope2'],
      [ask, 'nope3'],
    ],
  );
  assert.is(r.status, 77, r.output);
  assert.is(r.answered, 3);
  assert.is(r.output.match(/Wrong password; try again\./g)?.length, 2);
  assert.ok(r.output.includes(`stash: wrong password for the vault at ${t.vault}`));
  assertUnchanged(before, t, 'after three wrong tries');
  const ok = t.pty(
    ['get', 'asked', 'A'],
    [
      [ask, 'nope'],
      [ask, t.password],
    ],
  );
  assert.is(ok.status, 0, ok.output);
  assert.ok(ok.output.endsWith('alpha\r\n'), 'the second try succeeds');
});

/** Flips one bit of a file at `offset` (negative: from the end). */
function flip(path: string, offset: number): void {
  const b = readFileSync(path);
  const i = offset < 0 ? b.length + offset : offset;
  b[i]! ^= 0x01;
  writeFileSync(path, b);
}

test('a tampered container body: exit 65 naming the file, with and without a cached key; nothing changes', async () => {
  const t = await setup('body');
  const file = join(t.vault, 'containers', 'body.stash');
  flip(file, -5);
  const before = snapshot(t.vault);
  const marker = join(t.home, 'child-ran');
  const attempts = [
    ['get', 'body', 'A', '--password-file', t.pwFile], // unlocks with the password
    ['get', 'body', 'A'], // now from the agent's cached keys
    ['open', 'body'],
    ['set', 'body', 'C'],
    ['env', 'body', '--', 'touch', marker],
  ];
  for (const args of attempts) {
    const r = await t.run(args, { input: 'charlie' });
    assert.is(r.code, 65, `${args.join(' ')}: ${r.stderr}`);
    assert.is(r.stderr, `stash: ${file} is damaged or was modified: the encrypted body failed authentication\n`);
    assert.is(r.stdout, '');
  }
  assert.not.ok(existsSync(marker), 'env did not run the command');
  assertUnchanged(before, t, 'after reading a tampered container');
});

test('a tampered container header and a tampered vault.json are reported as such', async () => {
  const t = await setup('work', true);
  try {
    const file = join(t.vault, 'containers', 'work.stash');
    const original = readFileSync(file);
    flip(file, 30); // inside the authenticated header
    let before = snapshot(t.vault);
    const header = await t.run(['get', 'work', 'A', '--password-file', t.pwFile]);
    assert.is(header.code, 65, header.stderr);
    assert.match(header.stderr, new RegExp(`^stash: ${file} is damaged or was modified: `));
    const list = await t.run(['container', 'list', '--json']);
    assert.is(list.code, 0);
    const listed = JSON.parse(list.stdout) as Array<{ name: string; problem: string | null }>;
    assert.ok(listed[0]!.problem !== null, 'container list shows the damage');
    assertUnchanged(before, t, 'after a tampered header');
    writeFileSync(file, original);

    await t.run(['vault', 'sessions', 'lock-all']);
    const meta = join(t.vault, 'vault.json');
    const doc = JSON.parse(readFileSync(meta, 'utf8')) as { vaultKey: { wrapped: string } };
    const w = doc.vaultKey.wrapped;
    doc.vaultKey.wrapped = (w[0] === '0' ? '1' : '0') + w.slice(1);
    writeFileSync(meta, `${JSON.stringify(doc, null, 2)}\n`);
    before = snapshot(t.vault);
    const vault = await t.run(['get', 'work', 'A', '--password-file', t.pwFile]);
    assert.is(vault.code, 65, vault.stderr);
    assert.is(vault.stderr, `stash: ${meta} is damaged: checksum mismatch (the file was changed or damaged)\n`);
    assertUnchanged(before, t, 'after a tampered vault.json');
  } finally {
    await t.dispose();
  }
});

test.run();
