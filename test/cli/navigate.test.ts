/**
 * Finding your way, through the real binary: `find` across containers (open
 * ones without a password, the rest with one prompt at most), `mv` and `cp`
 * (one write within a container, never a value printed), `container rename`
 * (private: rewritten, same id; shared: only the local name, the file and id
 * untouched).
 */
import { readFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { addContact, createContainer, identityPublic, initVault, unlockVault, wipe } from '../../src/vault/index.js';
import { shareContainer } from '../../src/vault/sharing/index.js';
import { needFacility } from '../helpers/facility.js';
import { cliEnv, havePty, sharedCliEnv, snapshot } from './harness.js';

// mv, cp and rename stay within the containers of their test: those share one vault and agent. find,
// which searches every container, and the shared-container test make their own.
const shared = sharedCliEnv();
test.after(() => shared.dispose());

test('find lists CONTAINER/NAME by substring or glob across containers, never values; 1 when nothing matched', async () => {
  const t = cliEnv();
  try {
    await t.initVault(['work', 'home', 'empty']);
    for (const [c, n, v] of [
      ['work', 'API_TOKEN', 'find-me-not-1'],
      ['work', 'DB_PASSWORD', 'find-me-not-2'],
      ['home', 'WIFI_PASSWORD', 'find-me-not-3'],
      ['home', 'api_key', 'find-me-not-4'],
    ] as const) {
      assert.is((await t.run(['set', c, n, '--password-file', t.pwFile], { input: v })).code, 0);
    }
    const sub = await t.run(['find', 'password']);
    assert.is(sub.code, 0, sub.stderr);
    assert.is(sub.stdout, 'home/WIFI_PASSWORD\nwork/DB_PASSWORD\n');
    const glob = await t.run(['find', 'api_*', '--json']);
    assert.equal(JSON.parse(glob.stdout), [
      { container: 'home', name: 'api_key' },
      { container: 'work', name: 'API_TOKEN' },
    ]);
    assert.is((await t.run(['find', '*_PASS'])).code, 1, 'a glob matches the whole name');
    const none = await t.run(['find', 'nothing-like-this']);
    assert.is(none.code, 1);
    assert.is(none.stdout, '');
    assert.not.ok((sub.stdout + glob.stdout).includes('find-me-not'));

    // Locked, with no way to ask: the open ones are searched, the locked ones named.
    await t.run(['vault', 'sessions', 'lock', 'home']);
    const partial = await t.run(['find', 'password']);
    assert.is(partial.code, 0, partial.stderr);
    assert.is(partial.stdout, 'work/DB_PASSWORD\n');
    assert.match(partial.stderr, /warning: not searched, locked: home \(/);
    // Everything locked and the agent gone: one password opens them all.
    await t.stopAgents();
    const all = await t.run(['find', 'PASS', '--password-file', t.pwFile]);
    assert.is(all.code, 0, all.stderr);
    assert.is(all.stdout, 'home/WIFI_PASSWORD\nwork/DB_PASSWORD\n');
  } finally {
    await t.dispose();
  }
});

test('find asks for the password once at most, even with no agent to cache it', async () => {
  if (!needFacility(havePty(), 'pseudo-terminal', '/usr/bin/python3 with the pty module is missing')) return;
  const t = cliEnv();
  try {
    await t.initVault(['a', 'b', 'c']);
    for (const c of ['a', 'b', 'c'])
      assert.is((await t.run(['set', c, 'TOKEN', '--password-file', t.pwFile], { input: 'v' })).code, 0);
    await t.stopAgents();
    // No agent can start: its folder is a file.
    const r = t.pty(['find', 'tok'], [['Password for the vault', t.password]], {
      env: { STASH_SESSION_AGENT_DIR: t.pwFile },
    });
    assert.is(r.status, 0, r.output);
    assert.is(r.answered, 1, r.output);
    assert.is(r.output.match(/Password for the vault/g)?.length, 1, r.output);
    assert.match(r.output, /a\/TOKEN\r?\nb\/TOKEN\r?\nc\/TOKEN/);
  } finally {
    await t.dispose();
  }
});

test('mv and cp: within a container and across, CONTAINER2/ keeps the name, an existing target needs --force', async () => {
  const t = await shared.fresh(['work', 'home']);
  assert.is((await t.run(['set', 'work', 'TOKEN', '--password-file', t.pwFile], { input: 'v-1' })).code, 0);
  assert.is((await t.run(['set', 'work', 'OTHER'], { input: 'v-2' })).code, 0);
  const names = async (c: string): Promise<string[]> =>
    (JSON.parse((await t.run(['ls', c, '--json'])).stdout) as Array<{ name: string }>).map((e) => e.name);

  const cp = await t.run(['cp', 'work/TOKEN', 'home/']);
  assert.is(cp.code, 0, cp.stderr);
  assert.is(cp.stdout, '');
  assert.is(cp.stderr, 'Copied work/TOKEN to home/TOKEN.\n');
  assert.is((await t.run(['get', 'home', 'TOKEN'])).stdout, 'v-1');

  const before = snapshot(t.vault);
  const clash = await t.run(['mv', 'work/OTHER', 'work/TOKEN']);
  assert.is(clash.code, 73, clash.stderr);
  assert.is(clash.stderr, 'stash: work/TOKEN already exists; nothing was moved (--force replaces it)\n');
  assert.equal(snapshot(t.vault), before);

  const within = await t.run(['mv', 'work/OTHER', 'work/RENAMED']);
  assert.is(within.code, 0, within.stderr);
  assert.equal(await names('work'), ['RENAMED', 'TOKEN']);
  const across = await t.run(['mv', 'work/RENAMED', 'home/TOKEN', '--force']);
  assert.is(across.code, 0, across.stderr);
  assert.equal(await names('work'), ['TOKEN']);
  assert.is((await t.run(['get', 'home', 'TOKEN'])).stdout, 'v-2');

  for (const [args, re] of [
    [['mv', 'work', 'home/X'], /the source "work" is not CONTAINER\/PATH/],
    [['mv', 'work/TOKEN', 'work/TOKEN'], /is the source and the target/],
    [['cp', 'work/TOKEN', 'home/a b'], /invalid entry name/],
  ] as const) {
    const r = await t.run([...args]);
    assert.is(r.code, 64, r.stderr);
    assert.match(r.stderr, re);
  }
  const missing = await t.run(['mv', 'work/NOPE', 'home/']);
  assert.is(missing.code, 66, missing.stderr);
});

test('container rename: a private container is rewritten under the new name with the same id and entries', async () => {
  const t = await shared.fresh(['desk', 'shelf']);
  assert.is((await t.run(['set', 'desk', 'TOKEN', '--password-file', t.pwFile], { input: 'kept' })).code, 0);
  const idOf = async (name: string): Promise<string | undefined> =>
    (JSON.parse((await t.run(['container', 'list', '--json'])).stdout) as Array<{ name: string; id: string }>).find(
      (c) => c.name === name,
    )?.id;
  const id = await idOf('desk');
  const taken = await t.run(['container', 'rename', 'desk', 'shelf']);
  assert.is(taken.code, 73, taken.stderr);
  const r = await t.run(['container', 'rename', 'desk', 'job', '--password-file', t.pwFile]);
  assert.is(r.code, 0, r.stderr);
  assert.is(await idOf('job'), id);
  assert.is(await idOf('desk'), undefined);
  assert.not.ok(existsSync(join(t.vault, 'containers', 'desk.stash')));
  // The key the agent holds still fits: no password needed.
  const get = await t.run(['get', 'job', 'TOKEN']);
  assert.is(get.code, 0, get.stderr);
  assert.is(get.stdout, 'kept');
  assert.is((await t.run(['container', 'rename', 'nope', 'x'])).code, 66);
});

test('container rename of a shared container: only the local name; a linked file, its id and history stay', async () => {
  const alice = cliEnv();
  const bob = cliEnv();
  try {
    const keys: Buffer[] = [];
    const pubs = [];
    for (const t of [alice, bob]) {
      await initVault(t.vault, Buffer.from(t.password), { kdf: 'test' });
      const key = await unlockVault(t.vault, Buffer.from(t.password));
      keys.push(key);
      pubs.push(identityPublic(t.vault, key));
    }
    addContact(alice.vault, keys[0]!, {
      name: 'bob',
      email: 'bob@example.test',
      x25519: pubs[1]!.x25519,
      ed25519: pubs[1]!.ed25519,
    });
    addContact(bob.vault, keys[1]!, {
      name: 'alice',
      email: 'alice@example.test',
      x25519: pubs[0]!.x25519,
      ed25519: pubs[0]!.ed25519,
    });
    createContainer(alice.vault, keys[0]!, 'team');
    shareContainer(alice.vault, keys[0]!, 'team', [pubs[1]!]);
    for (const k of keys) wipe(k);
    const a = (args: string[], input?: string) =>
      alice.run([...args, '--password-file', alice.pwFile], input === undefined ? {} : { input });
    const b = (args: string[], input?: string) =>
      bob.run([...args, '--password-file', bob.pwFile], input === undefined ? {} : { input });
    assert.is((await a(['set', 'team', 'DEPLOY_KEY'], 'v1')).code, 0);
    const file = join(alice.home, 'team.stash');
    assert.is((await alice.run(['container', 'export', 'team', file])).code, 0);
    assert.is((await b(['container', 'link', file])).code, 0);

    // Bob renames his link: the file is not touched, and no password is asked.
    const bytes = readFileSync(file);
    await bob.run(['vault', 'sessions', 'lock-all']);
    const r = await bob.run(['container', 'rename', 'team', 'acme-team']);
    assert.is(r.code, 0, r.stderr);
    assert.match(
      r.stdout,
      new RegExp(
        `^Renamed team to acme-team in this vault; the shared file ${file.replace(/[.]/g, '\\.')} and its id are unchanged`,
      ),
    );
    assert.ok(readFileSync(file).equals(bytes), 'the linked file is byte for byte the same');
    const list = JSON.parse((await bob.run(['container', 'list', '--json'])).stdout) as Array<{
      name: string;
      link: string | null;
      shared: boolean;
    }>;
    assert.equal(
      list.map((c) => [c.name, c.link, c.shared]),
      [['acme-team', file, true]],
    );
    assert.is((await b(['get', 'acme-team', 'DEPLOY_KEY'])).stdout, 'v1');
    // Alice's next version reaches Bob under his name for it; his rollback history came along.
    assert.is((await a(['set', 'team', 'DEPLOY_KEY'], 'v2')).code, 0);
    assert.is((await alice.run(['container', 'export', 'team', file])).code, 0);
    assert.is((await b(['get', 'acme-team', 'DEPLOY_KEY'])).stdout, 'v2');
    assert.is((await b(['set', 'acme-team', 'FROM_BOB'], 'b')).code, 0);

    // Alice (the owner, a copy in her vault) renames hers: the copy keeps its bytes under the new name.
    const copyBefore = readFileSync(join(alice.vault, 'containers', 'team.stash'));
    const ra = await alice.run(['container', 'rename', 'team', 'crew']);
    assert.is(ra.code, 0, ra.stderr);
    assert.ok(readFileSync(join(alice.vault, 'containers', 'crew.stash')).equals(copyBefore));
    assert.not.ok(existsSync(join(alice.vault, 'containers', 'team.stash')));
    assert.not.ok(existsSync(join(alice.vault, 'shared', 'team.json')));
    assert.is((await a(['set', 'crew', 'NEXT'], 'n')).code, 0);
    const members = await a(['container', 'members', 'crew']);
    assert.is(members.code, 0, members.stderr);
    assert.match(members.stdout, /bob/);
  } finally {
    await alice.dispose();
    await bob.dispose();
  }
});

test.run();
