/**
 * `stash vault backup` and `stash vault restore` through the real CLI: a
 * vault with a private container, a contact and a linked shared container is
 * backed up, deleted (its linked file too), restored, and opens with the same
 * password; a wrong password, a damaged backup and an existing vault each
 * restore nothing.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { wipe } from '../../src/vault/index.js';
import { exportShared, linkShared } from '../../src/vault/sharing/index.js';
import { agentPids, sleep } from '../helpers/agent.js';
import { cliEnv, type CliEnv } from './harness.js';
import { sharedPair } from './members.js';

async function vaultWithEverything(): Promise<{ t: CliEnv; bob: CliEnv; linked: string }> {
  const [t, bob] = [cliEnv(), cliEnv()];
  const key = await sharedPair(t, bob, 'team');
  const folder = join(t.home, 'repo');
  mkdirSync(folder);
  const linked = join(folder, 'team.stash');
  exportShared(t.vault, 'team', linked);
  linkShared(t.vault, key, linked, 'team');
  wipe(key);
  const run = async (args: string[], input?: string): Promise<void> => {
    const r = await t.run([...args, '--password-file', t.pwFile], input === undefined ? {} : { input });
    assert.is(r.code, 0, `${args.join(' ')}: ${r.stderr}`);
  };
  await run(['container', 'create', 'work']);
  await run(['set', 'work', 'API_TOKEN'], 'tok-1\n');
  await run(['set', 'team', 'SHARED_KEY'], 'shared-1\n');
  return { t, bob, linked };
}

async function stopAgent(t: CliEnv): Promise<void> {
  await t.run(['vault', 'sessions', 'stop']);
  for (let i = 0; i < 100 && agentPids(t.dir).length > 0; i++) await sleep(20);
}

test('backup, delete the vault and its linked file, restore: every container, entry, contact and shared container is back with the same password', async () => {
  const { t, bob, linked } = await vaultWithEverything();
  try {
    const file = join(t.home, 'vault.backup');
    const b = await t.run(['vault', 'backup', file]);
    assert.is(b.code, 0, b.stderr);
    assert.match(
      b.stdout,
      /^Backed up the vault at .* \(\S+ \S+: \d+ files, 2 containers, 1 linked\)\.\nEverything in it stays encrypted/,
    );
    assert.is(statSync(file).mode & 0o777, 0o600);
    assert.not.ok(readFileSync(file).includes(Buffer.from('tok-1')), 'no value in the clear');
    assert.is((await t.run(['vault', 'backup', file])).code, 73, 'an existing file needs --force');

    await stopAgent(t); // its cached keys must not make the restored vault look fine
    rmSync(t.vault, { recursive: true });
    rmSync(linked);
    const r = await t.run(['vault', 'restore', file, '--password-file', t.pwFile]);
    assert.is(r.code, 0, r.stderr);
    assert.match(
      r.stdout,
      /^Restored the vault of \S+ to .*: 2 containers, every one opened with the password\.\n {2}team: wrote its linked file back to /,
    );
    assert.ok(existsSync(linked));
    await t.run(['vault', 'sessions', 'lock-all']);
    assert.is((await t.run(['get', 'work', 'API_TOKEN', '--password-file', t.pwFile])).stdout, 'tok-1');
    assert.is((await t.run(['get', 'team', 'SHARED_KEY'])).stdout, 'shared-1');
    assert.match((await t.run(['vault', 'contact', 'list'])).stdout, /bob@example\.test/);
    assert.match((await t.run(['container', 'list'])).stdout, /team +\d+ .* shared, 2 members, linked to /);
    assert.is(statSync(t.vault).mode & 0o777, 0o700);
  } finally {
    for (const x of [t, bob]) {
      await stopAgent(x);
      x.cleanup();
    }
  }
});

test('restore refuses a wrong password, a damaged backup and an existing vault, and writes nothing', async () => {
  const { t, bob } = await vaultWithEverything();
  try {
    const file = join(t.home, 'vault.backup');
    assert.is((await t.run(['vault', 'backup', file])).code, 0);
    const into = join(t.home, 'restored');
    const wrong = join(t.home, 'wrong');
    writeFileSync(wrong, 'not the password at all\n', { mode: 0o600 });
    const bad = await t.run(['vault', 'restore', file, '--into', into, '--password-file', wrong]);
    assert.is(bad.code, 77, bad.stderr);
    assert.not.ok(existsSync(into), 'nothing restored');
    const damaged = join(t.home, 'damaged.backup');
    const bytes = readFileSync(file);
    bytes[bytes.length - 100]! ^= 1; // inside the last file, after the manifest
    writeFileSync(damaged, bytes);
    const d = await t.run(['vault', 'restore', damaged, '--into', into, '--password-file', t.pwFile]);
    assert.is(d.code, 65, d.stderr);
    assert.match(d.stderr, /modified or damaged after it was made/);
    assert.not.ok(existsSync(into));
    writeFileSync(damaged, 'STASHBK1 garbage');
    assert.is((await t.run(['vault', 'restore', damaged, '--into', into, '--password-file', t.pwFile])).code, 65);
    assert.equal(
      readdirSync(t.home).filter((n) => n.includes('.restore-')),
      [],
      'no staging folder left behind',
    );
    const exists = await t.run(['vault', 'restore', file, '--password-file', t.pwFile]);
    assert.is(exists.code, 73);
    assert.match(exists.stderr, /a vault already exists at .*--into DIR, or add --force/);
    const forced = await t.run(['vault', 'restore', file, '--force', '--password-file', t.pwFile]);
    assert.is(forced.code, 0, forced.stderr);
    assert.match(forced.stderr, /is now at .*\.before-restore-/);
    assert.equal(
      readdirSync(t.home).filter((n) => n.startsWith('vault.before-restore-')).length,
      1,
      'the old vault was moved aside',
    );
  } finally {
    for (const x of [t, bob]) {
      await stopAgent(x);
      x.cleanup();
    }
  }
});

test('a private container exports alone, encrypted for this vault only: it imports back here, and another vault is refused', async () => {
  const { t, bob } = await vaultWithEverything();
  try {
    const file = join(t.home, 'work.stash');
    const e = await t.run(['container', 'export', 'work', file]);
    assert.is(e.code, 0, e.stderr);
    assert.match(e.stdout, /^Wrote private container work to .* \(mode 0600\)\. Only this vault can open it/);
    assert.is(statSync(file).mode & 0o777, 0o600);
    assert.not.ok(readFileSync(file).includes(Buffer.from('tok-1')));
    assert.is((await t.run(['container', 'rm', 'work', '--force'])).code, 0);
    const i = await t.run(['container', 'import', file, '--password-file', t.pwFile]);
    assert.is(i.code, 0, i.stderr);
    assert.is(i.stdout, `Imported private container work from ${file}.\n`);
    assert.is((await t.run(['get', 'work', 'API_TOKEN', '--password-file', t.pwFile])).stdout, 'tok-1');
    const again = await t.run(['container', 'import', file]);
    assert.match(again.stdout, /already holds what .* holds; nothing changed/);
    const other = await bob.run(['container', 'import', file, '--password-file', bob.pwFile]);
    assert.is(other.code, 77, other.stderr);
    assert.match(
      other.stderr,
      /is a private container of another vault: only the vault that exported it can import it/,
    );
  } finally {
    for (const x of [t, bob]) {
      await stopAgent(x);
      x.cleanup();
    }
  }
});

test.run();
