/**
 * Sharing a container through a folder, as a new user does it: export and
 * import name the files the user named, a missing folder is named, merge
 * says what it kept only when it kept something, a moved linked file reads
 * the same in `container list` and `ls`, a removed member is told so, and
 * another Unix user can import the owner's export (and its update) without
 * anyone running chmod. Real `stash` processes over vaults made with the
 * library (contacts added directly; the key exchange has suites of its own).
 */
import { spawn } from 'node:child_process';
import { chmodSync, chownSync, mkdirSync, readdirSync, renameSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { addContact, createContainer, identityPublic, initVault, unlockVault, wipe } from '../../src/vault/index.js';
import { shareContainer } from '../../src/vault/sharing/index.js';
import { agentPids, sleep } from '../helpers/agent.js';
import { haveCommand, isRoot, needFacility } from '../helpers/facility.js';
import { readableCopy, type ReadableCopy } from '../helpers/readable-copy.js';
import { tempDir } from '../keyserver/harness.js';
import { cliEnv, type CliEnv, type RunResult } from './harness.js';

interface Person {
  t: CliEnv;
  name: string;
  run(args: string[], input?: string): Promise<RunResult>;
  ok(args: string[], input?: string): Promise<RunResult>;
  uid: number | null;
}

function runArgv(t: CliEnv, argv: string[], args: string[], input: string): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(argv[0]!, [...argv.slice(1), ...args], {
      env: { ...t.env, STASH_PASSWORD_FILE: t.pwFile },
      stdio: ['pipe', 'pipe', 'pipe'],
      detached: true,
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => {
      stdout += d;
    });
    child.stderr.on('data', (d) => {
      stderr += d;
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
    child.on('error', reject);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr });
    });
    child.stdin.on('error', () => {});
    child.stdin.end(input);
  });
}

/** Two or more vaults that know each other as contacts; `uid` runs that person through setpriv from `copy`. */
async function people(
  specs: Array<{ name: string; uid?: number }>,
  copy: ReadableCopy | null = null,
): Promise<Person[]> {
  const made: Array<Person & { pub: { x25519: Buffer; ed25519: Buffer }; key: Buffer }> = [];
  for (const spec of specs) {
    const t = cliEnv();
    await initVault(t.vault, Buffer.from(t.password), { kdf: 'test' });
    const key = await unlockVault(t.vault, Buffer.from(t.password));
    const p = identityPublic(t.vault, key);
    const uid = spec.uid ?? null;
    const argv =
      uid === null || copy === null
        ? [process.execPath, join(process.cwd(), 'bin', 'stash.js')]
        : [
            'setpriv',
            `--reuid=${uid}`,
            `--regid=${uid}`,
            '--clear-groups',
            copy.node,
            join(copy.root, 'bin', 'stash.js'),
          ];
    const run = (args: string[], input = ''): Promise<RunResult> => runArgv(t, argv, args, input);
    const ok = async (args: string[], input = ''): Promise<RunResult> => {
      const r = await run(args, input);
      assert.is(r.code, 0, `${spec.name}: stash ${args.join(' ')}: ${r.stderr}`);
      return r;
    };
    made.push({ t, name: spec.name, run, ok, uid, pub: { x25519: p.x25519, ed25519: p.ed25519 }, key });
  }
  for (const a of made) {
    for (const b of made)
      if (a !== b) addContact(a.t.vault, a.key, { name: b.name, email: `${b.name}@example.test`, ...b.pub });
  }
  // The owner (the first) shares `ci` and `team` with everyone else.
  const owner = made[0]!;
  for (const c of ['ci', 'team']) {
    createContainer(owner.t.vault, owner.key, c);
    shareContainer(
      owner.t.vault,
      owner.key,
      c,
      made.slice(1).map((m) => m.pub),
    );
  }
  for (const m of made) {
    wipe(m.key);
    if (m.uid !== null) chownTree(m.t.home, m.uid);
  }
  return made;
}

function chownTree(path: string, uid: number): void {
  chownSync(path, uid, uid);
  if (statSync(path).isDirectory()) for (const e of readdirSync(path)) chownTree(join(path, e), uid);
}

async function dispose(list: Person[]): Promise<void> {
  for (const p of list) {
    await p.run(['vault', 'sessions', 'stop']);
    for (let i = 0; i < 100 && agentPids(p.t.dir).length > 0; i++) await sleep(20);
    p.t.cleanup();
  }
}

test('export to a missing folder names it; import names the file given; merge names what it kept only when it kept something', async () => {
  const dir = tempDir('sharing-folder');
  const [alice, bob] = await people([{ name: 'alice' }, { name: 'bob' }]);
  try {
    const missing = join(dir.path, 'nonexist', 'ci.stash');
    const nowhere = await alice!.run(['container', 'export', 'ci', missing]);
    assert.is(nowhere.code, 66, nowhere.stderr);
    assert.is(
      nowhere.stderr,
      `stash: cannot export ci to ${missing}: the folder ${join(dir.path, 'nonexist')} does not exist (create it first); nothing was written\n`,
    );

    const file = join(dir.path, 'ci.stash');
    await alice!.ok(['set', 'ci', 'START'], 's\n');
    await alice!.ok(['container', 'export', 'ci', file]);
    const imported = await bob!.ok(['container', 'import', file]);
    assert.match(
      imported.stdout,
      new RegExp(`^Imported ${file} as ci \\(version \\d+\\)\\.\\n`),
      'the file the user named, not the vault copy',
    );

    // Both sides change START (a conflict, --prefer decides) and nothing else: no word about one-sided entries.
    await alice!.ok(['set', 'ci', 'START'], 'alice\n');
    await bob!.ok(['set', 'ci', 'START'], 'bob\n');
    const bobs = join(dir.path, 'bob-ci.stash');
    await bob!.ok(['container', 'export', 'ci', bobs]);
    const plain = await alice!.ok(['container', 'merge', 'ci', bobs, '--prefer', 'file']);
    assert.match(plain.stdout, /^Merged /);
    assert.not.match(plain.stdout, /one side|deleted/, plain.stdout);

    // Now each side holds an entry the other lacks: merge names them.
    await alice!.ok(['set', 'ci', 'ONLY_ALICE'], 'a\n');
    await bob!.ok(['set', 'ci', 'ONLY_BOB'], 'b\n');
    await bob!.ok(['container', 'export', 'ci', bobs]);
    const named = await alice!.ok(['container', 'merge', 'ci', bobs]);
    assert.match(
      named.stdout,
      /\nHeld by one side only, so kept: ONLY_ALICE, ONLY_BOB\. If the other side had deleted any of them, delete it again \(with --purge if it was purged\), or merge with --base FILE, the common version\.\n/,
    );
  } finally {
    await dispose([alice!, bob!]);
    dir.remove();
  }
});

test('a linked file that moved reads the same in container list and ls (no 1970 date); a removed member is told so', async () => {
  const dir = tempDir('sharing-folder');
  const [alice, bob] = await people([{ name: 'alice' }, { name: 'bob' }]);
  try {
    const file = join(dir.path, 'team.stash');
    await alice!.ok(['container', 'export', 'team', file]);
    await alice!.ok(['container', 'link', file]);
    await bob!.ok(['container', 'link', file]);
    assert.match(
      (await bob!.ok(['container', 'list'])).stdout,
      /\nteam +\d+ +\d{4}-\d\d-\d\d \d\d:\d\d:\d\d +shared, 2 members, linked to /,
    );

    await alice!.ok(['container', 'unshare', 'team', 'bob']);
    const removed = await bob!.ok(['container', 'list']);
    assert.match(
      removed.stdout,
      /\nteam +\d+ +\S+ \S+ +shared, 1 member, you are not one of them \(removed by the owner\?\): it no longer opens for you, linked to /,
    );
    const json = JSON.parse((await bob!.ok(['container', 'list', '--json'])).stdout) as Array<{
      name: string;
      member: boolean | null;
    }>;
    assert.is(json.find((c) => c.name === 'team')!.member, false);
    assert.not.match((await alice!.ok(['container', 'list'])).stdout, /not one of them/, 'the owner is a member');

    renameSync(file, `${file}.moved`);
    const list = await alice!.ok(['container', 'list']);
    const why = `linked to ${file}, which does not exist (moved, or not pulled yet?)`;
    assert.ok(
      list.stdout.includes(`team  -      -                    MISSING: ${why}`) ||
        /\nteam +- +- +MISSING: /.test(list.stdout),
      list.stdout,
    );
    assert.ok(list.stdout.includes(why), list.stdout);
    assert.not.match(list.stdout, /1970/);
    const listed = JSON.parse((await alice!.ok(['container', 'list', '--json'])).stdout) as Array<{
      name: string;
      missing: boolean;
      size: number | null;
      modified: string | null;
    }>;
    assert.equal(
      listed.filter((c) => c.name === 'team').map((c) => [c.missing, c.size, c.modified]),
      [[true, null, null]],
    );
    const ls = await alice!.run(['ls', 'team']);
    assert.is(ls.code, 66, ls.stderr);
    assert.ok(ls.stderr.includes(why), `ls says the same words: ${ls.stderr}`);
  } finally {
    await dispose([alice!, bob!]);
    dir.remove();
  }
});

test("another Unix user imports the owner's export from a folder they can only read, and its update, with no chmod by anyone", async () => {
  if (!needFacility(isRoot && haveCommand('setpriv'), 'second uid', 'needs root and setpriv')) return;
  const dir = tempDir('sharing-folder-users');
  chmodSync(dir.path, 0o755);
  const folder = join(dir.path, 'shared');
  mkdirSync(folder, { mode: 0o755 }); // the owner's folder: others may read, not write
  chmodSync(folder, 0o755);
  const copy = readableCopy([], { dependencies: true });
  const list = await people([{ name: 'alice' }, { name: 'bob', uid: 65534 }], copy);
  const [alice, bob] = list as [Person, Person];
  const umask = process.umask(0o022); // a user's usual umask, whatever the test runner has
  try {
    const file = join(folder, 'ci.stash');
    await alice.ok(['set', 'ci', 'TOKEN'], 'one\n');
    await alice.ok(['container', 'export', 'ci', file]);
    assert.is(statSync(file).mode & 0o777, 0o644, 'ciphertext meant for others: 0664 less the umask');
    assert.match((await bob.ok(['container', 'import', file])).stdout, new RegExp(`^Imported ${file} as ci `));
    assert.is((await bob.ok(['get', 'ci', 'TOKEN'])).stdout, 'one');

    await alice.ok(['set', 'ci', 'TOKEN'], 'two\n');
    await alice.ok(['container', 'export', 'ci', file]);
    assert.is(statSync(file).mode & 0o777, 0o644, 'the update keeps the mode');
    assert.match(
      (await bob.ok(['container', 'import', file])).stdout,
      new RegExp(`^Updated ci from version \\d+ to version \\d+ \\(from ${file}\\)\\.`),
    );
    assert.is((await bob.ok(['get', 'ci', 'TOKEN'])).stdout, 'two');
    // The owner's private containers stay private.
    assert.is(statSync(join(alice.t.vault, 'vault.json')).mode & 0o777, 0o600);
  } finally {
    process.umask(umask);
    await dispose(list);
    copy.remove();
    dir.remove();
  }
});

test('offboarding: unshare lists the entries the removed member could read; exposure shrinks as they are changed', async () => {
  const [alice, bob, carol] = await people([{ name: 'alice' }, { name: 'bob' }, { name: 'carol' }]);
  try {
    for (const [n, v] of [
      ['DB_PASSWORD', 'p1'],
      ['API_TOKEN', 't1'],
      ['DEPLOY_KEY', 'k1'],
    ])
      await alice!.ok(['set', 'team', n!], `${v}\n`);
    const unshare = await alice!.ok(['container', 'unshare', 'team', 'bob']);
    assert.match(
      unshare.stdout,
      /Change those secrets if that matters:\n {2}API_TOKEN {2}last changed \S+ \S+ UTC\n {2}DB_PASSWORD {2}last changed .*\n {2}DEPLOY_KEY {2}last changed .*\nThis list shrinks/,
    );
    await alice!.ok(['set', 'team', 'DB_PASSWORD'], 'p2\n'); // rotated after the removal
    await alice!.ok(['set', 'team', 'NEW_AFTER'], 'n\n'); // never readable by bob
    const json = JSON.parse((await alice!.ok(['container', 'exposure', 'team', '--json'])).stdout) as Array<{
      member: string;
      entries: Array<{ name: string }>;
    }>;
    assert.equal(
      json.map((m) => [m.member, m.entries.map((e) => e.name)]),
      [['bob', ['API_TOKEN', 'DEPLOY_KEY']]],
    );
    await alice!.ok(['container', 'unshare', 'team', 'carol']);
    const text = (await alice!.ok(['container', 'exposure', 'team', '--member', 'carol'])).stdout;
    assert.match(
      text,
      /^carol \S+, removed \S+ \(could open up to version \d+\):\n {2}API_TOKEN .*\n {2}DB_PASSWORD .*\n {2}DEPLOY_KEY .*\n {2}NEW_AFTER /,
      'carol could read everything up to her removal',
    );
    const none = await alice!.run(['container', 'exposure', 'team', '--member', 'dave']);
    assert.is(none.code, 66);
  } finally {
    await dispose([alice!, bob!, carol!]);
  }
});

test.run();
