/**
 * Entry history through the real binary (issue 27, item 7): three sets, then
 * `history`, `get --version`, `restore`; rm keeps it and rm --purge drops it;
 * the vault.history_keep cap; a vault written by the previous release opens
 * and is upgraded on its next write; a member of a shared container sees it.
 */
import { readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { addContact, identityPublic, unlockVault, wipe } from '../../src/vault/index.js';
import { copyFixtureVault } from '../helpers/fixture-vault.js';
import { cliEnv, sharedCliEnv, type CliEnv, type RunResult } from './harness.js';

// The tests of one private container's history share one vault and agent (each its own containers);
// the previous release's vault and the two-person test make their own.
const shared = sharedCliEnv();
test.after(() => shared.dispose());

async function ok(t: CliEnv, args: string[], input?: string, env?: NodeJS.ProcessEnv): Promise<RunResult> {
  const r = await t.run(args, { ...(input === undefined ? {} : { input }), ...(env ? { env } : {}) });
  assert.is(r.code, 0, `${args.join(' ')}: ${r.stderr}`);
  return r;
}

/** A refusal: its exit status and one `stash: ` line (a usage error adds the usage), no stack trace. */
async function refused(t: CliEnv, args: string[], status: number, message: RegExp): Promise<void> {
  const r = await t.run(args);
  assert.is(r.code, status, `${args.join(' ')}: expected ${status}, got ${r.code}: ${r.stderr}`);
  assert.match(r.stderr, status === 64 ? /^stash: [^\n]+\n/ : /^stash: [^\n]+\n$/, `one line: ${r.stderr}`);
  assert.not.match(r.stderr, /\n\s+at /, 'no stack trace');
  assert.match(r.stderr, message);
}

interface HistoryDoc {
  container: string;
  name: string;
  current: { size: number; changedAt: string | null } | null;
  versions: Array<{ version: number; size: number; changedAt: string | null; replacedAt: string | null }>;
}

const historyJson = async (t: CliEnv, c: string, name: string): Promise<HistoryDoc> =>
  JSON.parse((await ok(t, ['history', c, name, '--json'])).stdout) as HistoryDoc;

test('three sets: history lists two earlier values, get --version prints each, restore brings one back', async () => {
  const t = await shared.fresh(['work']);
  for (const v of ['value-one', 'value-two!', 'value-three']) await ok(t, ['set', 'work', 'TOKEN'], v);
  const text = (await ok(t, ['history', 'work', 'TOKEN'])).stdout;
  assert.match(
    text,
    /^VERSION +BYTES +CHANGED +REPLACED\ncurrent +11 +\d{4}-\d\d-\d\d [\d:]{8} UTC +-\n1 +10 +\d{4}.* UTC +\d{4}.* UTC\n2 +9 +/,
  );
  assert.not.match(text, /value-/, 'history prints no value');
  const doc = await historyJson(t, 'work', 'TOKEN');
  assert.equal(
    [doc.container, doc.name, doc.current?.size, doc.versions.map((v) => [v.version, v.size])],
    [
      'work',
      'TOKEN',
      11,
      [
        [1, 10],
        [2, 9],
      ],
    ],
  );
  assert.ok(doc.versions[0]!.replacedAt === doc.current!.changedAt, 'version 1 ended when the current value was set');
  assert.ok(Date.parse(doc.versions[1]!.changedAt!) <= Date.parse(doc.versions[0]!.changedAt!));
  assert.is((await ok(t, ['get', 'work', 'TOKEN', '--version', '1'])).stdout, 'value-two!');
  assert.is((await ok(t, ['get', 'work', 'TOKEN', '--version', '2'])).stdout, 'value-one');
  const json = JSON.parse((await ok(t, ['get', 'work', 'TOKEN', '--version', '2', '--json'])).stdout) as Record<
    string,
    unknown
  >;
  assert.equal([json.version, json.value, json.replacedAt], [2, 'value-one', doc.versions[1]!.replacedAt]);
  await refused(
    t,
    ['get', 'work', 'TOKEN', '--version', '3'],
    66,
    /work\/TOKEN has 2 previous values \(versions 1 to 2\); there is no version 3/,
  );
  for (const bad of ['0', 'x', '101', '1.5', ''])
    await refused(t, ['get', 'work', 'TOKEN', `--version=${bad}`], 64, /--version takes a whole number from 1/);
  await refused(t, ['restore', 'work', 'TOKEN'], 64, /restore needs --version N/);

  const r = await ok(t, ['restore', 'work', 'TOKEN', '--version', '2']);
  assert.match(r.stderr, /Restored version 2 of TOKEN in work/);
  assert.is((await ok(t, ['get', 'work', 'TOKEN'])).stdout, 'value-one');
  assert.equal(
    (await historyJson(t, 'work', 'TOKEN')).versions.map((v) => v.size),
    [11, 10, 9],
    'the value restored over is version 1: a restore can be undone',
  );
  assert.is((await ok(t, ['get', 'work', 'TOKEN', '--version', '1'])).stdout, 'value-three');
});

test('rm keeps the history (history shows it, restore brings it back); rm --purge drops entry and history', async () => {
  const t = await shared.fresh(['drawer']);
  await ok(t, ['set', 'drawer', 'KEY'], 'first');
  await ok(t, ['set', 'drawer', 'KEY'], 'second');
  assert.match((await ok(t, ['rm', 'drawer', 'KEY'])).stderr, /its previous values are kept/);
  await refused(t, ['get', 'drawer', 'KEY'], 66, /has no entry KEY/);
  assert.not.match((await ok(t, ['ls', 'drawer'])).stdout, /KEY/);
  const doc = await historyJson(t, 'drawer', 'KEY');
  assert.equal([doc.current, doc.versions.map((v) => v.size)], [null, [6, 5]]);
  assert.match(
    (await ok(t, ['history', 'drawer', 'KEY'])).stdout,
    /KEY was removed; stash restore drawer KEY --version 1/,
  );
  await ok(t, ['restore', 'drawer', 'KEY', '--version', '1']);
  assert.is((await ok(t, ['get', 'drawer', 'KEY'])).stdout, 'second');
  assert.match(
    (await ok(t, ['rm', 'drawer', 'KEY', '--purge'])).stderr,
    /Removed KEY and its previous values from drawer/,
  );
  await refused(t, ['history', 'drawer', 'KEY'], 66, /has no entry KEY/);
  await refused(t, ['get', 'drawer', 'KEY', '--version', '1'], 66, /has no entry KEY/);
  await refused(t, ['rm', 'drawer', 'KEY', '--purge'], 66, /no entry KEY and no history of one/);
  // mv within a container takes the history along; to another container, the source keeps it.
  await ok(t, ['set', 'drawer', 'OLD'], 'm1');
  await ok(t, ['set', 'drawer', 'OLD'], 'm2');
  await ok(t, ['mv', 'drawer/OLD', 'drawer/NEW']);
  assert.equal(
    (await historyJson(t, 'drawer', 'NEW')).versions.map((v) => v.size),
    [2],
  );
  assert.is((await ok(t, ['get', 'drawer', 'NEW', '--version', '1'])).stdout, 'm1');
  await refused(t, ['history', 'drawer', 'OLD'], 66, /has no entry OLD/);
  await ok(t, ['container', 'create', 'other']);
  await ok(t, ['mv', 'drawer/NEW', 'other/NEW']);
  assert.equal((await historyJson(t, 'other', 'NEW')).versions, []);
  assert.equal(
    (await historyJson(t, 'drawer', 'NEW')).versions.map((v) => v.size),
    [2, 2],
    'the moved value and m1 stay in drawer, as after rm',
  );
  // A name with only a history can be purged on its own.
  await ok(t, ['set', 'drawer', 'GONE'], 'x');
  await ok(t, ['rm', 'drawer', 'GONE']);
  await ok(t, ['rm', 'drawer', 'GONE', '--purge']);
  await refused(t, ['history', 'drawer', 'GONE'], 66, /has no entry GONE/);
});

test('the cap: vault.history_keep (or STASH_HISTORY_KEEP) previous values per entry, 0 keeps none', async () => {
  const t = await shared.fresh(['capped']);
  const keep3 = { STASH_HISTORY_KEEP: '3' };
  for (let i = 1; i <= 6; i++) await ok(t, ['set', 'capped', 'K'], `v${i}`, keep3);
  const doc = await historyJson(t, 'capped', 'K');
  assert.is(doc.versions.length, 3);
  assert.equal(
    await Promise.all([1, 2, 3].map(async (n) => (await ok(t, ['get', 'capped', 'K', '--version', String(n)])).stdout)),
    ['v5', 'v4', 'v3'],
  );
  // The default (10) from here on: the kept three grow again.
  await ok(t, ['set', 'capped', 'K'], 'v7');
  assert.is((await historyJson(t, 'capped', 'K')).versions.length, 4);
  await ok(t, ['set', 'capped', 'K'], 'v8', { STASH_HISTORY_KEEP: '0' });
  const none = await ok(t, ['history', 'capped', 'K']);
  assert.match(none.stdout, /No previous values of K yet/);
  // With none kept, nothing claims a value was kept.
  const zero = { STASH_HISTORY_KEEP: '0' };
  await ok(t, ['set', 'capped', 'K'], 'v9', zero);
  const restored = await t.run(['restore', 'capped', 'K', '--version', '1'], { env: zero });
  assert.is(restored.code, 66, restored.stderr);
  const removed = await ok(t, ['rm', 'capped', 'K'], undefined, zero);
  assert.match(removed.stderr, /vault.history_keep = 0: no previous value is kept/);
  assert.not.match(removed.stderr, /previous values are kept/);
});

test('a vault written by the previous release opens as before, and its next write adds history', async () => {
  const t = cliEnv();
  try {
    const fixture = join(process.cwd(), 'test', 'fixtures', 'previous-release');
    const vault = t.env.STASH_VAULT_DIR!;
    copyFixtureVault(fixture, vault);
    const pw = { STASH_PASSWORD_FILE: join(fixture, 'password') };
    const file = join(vault, 'containers', 'legacy.stash');
    const before = readFileSync(file);
    assert.is((await ok(t, ['get', 'legacy', 'API_KEY'], undefined, pw)).stdout, 'second-key');
    assert.is((await ok(t, ['get', 'legacy', 'DB_URL'], undefined, pw)).stdout, 'postgres://db');
    const ls = JSON.parse((await ok(t, ['ls', 'legacy', '--json'], undefined, pw)).stdout) as Array<{
      name: string;
      changedAt: string | null;
    }>;
    assert.ok(
      ls.every((r) => r.changedAt !== null),
      'its change times read',
    );
    const old = await t.run(['history', 'legacy', 'API_KEY', '--json'], { env: pw });
    assert.equal((JSON.parse(old.stdout) as HistoryDoc).versions, [], 'no history before this release wrote it');
    assert.ok(readFileSync(file).equals(before), 'reading does not rewrite it');
    await ok(t, ['set', 'legacy', 'API_KEY'], 'third-key', pw);
    assert.is(statSync(file).mode & 0o777, 0o600);
    const doc = JSON.parse(
      (await ok(t, ['history', 'legacy', 'API_KEY', '--json'], undefined, pw)).stdout,
    ) as HistoryDoc;
    assert.equal(
      doc.versions.map((v) => v.size),
      [10],
    );
    assert.ok(doc.versions[0]!.changedAt !== null, 'the previous value keeps the change time the old release recorded');
    assert.is((await ok(t, ['get', 'legacy', 'API_KEY', '--version', '1'], undefined, pw)).stdout, 'second-key');
    assert.is((await ok(t, ['get', 'legacy', 'DB_URL'], undefined, pw)).stdout, 'postgres://db');
  } finally {
    await t.dispose();
  }
});

test('shared: a member sees the history the owner wrote, and gets a previous value', async () => {
  const alice = cliEnv();
  const bob = cliEnv();
  try {
    await alice.initVault(['team']);
    await bob.initVault();
    // Contacts added through the library (the key server exchange has its own suite, teams.test.ts).
    for (const [me, other, name] of [
      [alice, bob, 'bob'],
      [bob, alice, 'alice'],
    ] as const) {
      const key = await unlockVault(me.env.STASH_VAULT_DIR!, Buffer.from(me.password));
      const p = identityPublic(other.env.STASH_VAULT_DIR!);
      addContact(me.env.STASH_VAULT_DIR!, key, {
        name,
        email: `${name}@example.test`,
        x25519: p.x25519,
        ed25519: p.ed25519,
      });
      wipe(key);
    }
    await ok(alice, ['set', 'team', 'API_KEY'], 'team-one');
    await ok(alice, ['container', 'share', 'team', 'bob']);
    const file = join(alice.home, 'team.stash');
    await ok(alice, ['container', 'export', 'team', file]);
    await ok(alice, ['container', 'link', file, '--name', 'team']);
    await ok(bob, ['container', 'link', file]);
    await ok(alice, ['set', 'team', 'API_KEY'], 'team-two');
    const doc = await historyJson(bob, 'team', 'API_KEY');
    assert.equal([doc.current?.size, doc.versions.map((v) => v.size)], [8, [8]]);
    assert.is((await ok(bob, ['get', 'team', 'API_KEY', '--version', '1'])).stdout, 'team-one');
    // Bob's restore is a signed write like any other; Alice reads it.
    await ok(bob, ['restore', 'team', 'API_KEY', '--version', '1']);
    assert.is((await ok(alice, ['get', 'team', 'API_KEY'])).stdout, 'team-one');
    assert.is((await ok(alice, ['get', 'team', 'API_KEY', '--version', '1'])).stdout, 'team-two');
  } finally {
    await alice.dispose();
    await bob.dispose();
  }
});

test.run();
