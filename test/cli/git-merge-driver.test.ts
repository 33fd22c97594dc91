/**
 * `stash container merge-driver` under real git: a bare repository, Alice's
 * and Bob's clones, each with a vault of its own linked to the clone's
 * team.stash (Alice owns the shared container, Bob is a member), and the
 * driver installed with the two documented lines (git finds `stash` on PATH).
 * Changes to different entries (and to an entry's value on one side and its
 * field on the other) merge on `git pull` with both values kept; changes to
 * one entry leave git's conflict, named, with nothing lost and a way to
 * finish by hand; a driver that cannot unlock the vault leaves a conflict too.
 */
import { chmodSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { addContact, identityPublic, unlockVault, wipe } from '../../src/vault/index.js';
import { stashBin } from '../helpers/agent.js';
import { haveCommand, needFacility } from '../helpers/facility.js';
import { runProcess, type ProcessResult } from '../helpers/run-process.js';
import { tempDir } from '../keyserver/harness.js';
import { cliEnv, type CliEnv } from './harness.js';
import { as, ok, sharedPair } from './members.js';

const haveGit = haveCommand('git');
let alice: CliEnv;
let bob: CliEnv;
let root: { path: string; remove(): void } | null = null;
/** Folder of a `stash` command for git to find on PATH, as an installed stash would be. */
let shims: string;
const clone = (who: 'alice' | 'bob') => join(root!.path, who);

/** git in `cwd` as `t` (their HOME and vault; the password file only when `password`), no terminal. */
function git(t: CliEnv, cwd: string, args: string[], password = true): Promise<ProcessResult> {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(t.env)) if (!k.startsWith('GIT_')) env[k] = v;
  Object.assign(env, { PATH: `${shims}:${process.env.PATH}`, GIT_CONFIG_NOSYSTEM: '1', LC_ALL: 'C' });
  if (password) env.STASH_PASSWORD_FILE = t.pwFile;
  else delete env.STASH_PASSWORD_FILE;
  return runProcess(['git', ...args], { cwd, env });
}

async function gitOk(t: CliEnv, cwd: string, args: string[]): Promise<ProcessResult> {
  const r = await git(t, cwd, args);
  assert.is(r.code, 0, `git ${args.join(' ')}: ${r.stdout}${r.stderr}`);
  return r;
}

/** The clone's git settings: who commits, merge (not rebase) on pull, and the driver's documented line. */
async function configure(t: CliEnv, cwd: string, name: string): Promise<void> {
  for (const [k, v] of [
    ['user.name', name],
    ['user.email', `${name}@example.test`],
    ['pull.rebase', 'false'],
    ['merge.stash.driver', 'stash container merge-driver %O %A %B'],
  ])
    await gitOk(t, cwd, ['config', k!, v!]);
}

const value = async (t: CliEnv, args: string[]) => (await ok(t, ['get', 'team', ...args])).stdout;

test.before(async () => {
  if (!haveGit) return;
  root = tempDir('git-merge');
  shims = join(root.path, 'bin');
  mkdirSync(shims);
  writeFileSync(join(shims, 'stash'), `#!/bin/sh\nexec '${process.execPath}' '${stashBin}' "$@"\n`);
  chmodSync(join(shims, 'stash'), 0o755);
  [alice, bob] = [cliEnv(), cliEnv()];
  const aliceKey = await sharedPair(alice, bob, 'team');
  const alicePub = identityPublic(alice.vault, aliceKey);
  wipe(aliceKey);
  const bobKey = await unlockVault(bob.vault, Buffer.from(bob.password));
  addContact(bob.vault, bobKey, { name: 'alice', email: 'alice@example.test', ...alicePub });
  wipe(bobKey);
  await ok(alice, ['set', 'team', 'API_KEY'], 'sk-0');
  await ok(alice, ['set', 'team', 'web/github.com', '--field', 'username=pat'], 'gh-0');

  const origin = join(root.path, 'origin.git');
  await gitOk(alice, root.path, ['init', '--bare', '-q', '-b', 'main', origin]);
  await gitOk(alice, root.path, ['clone', '-q', origin, clone('alice')]);
  await configure(alice, clone('alice'), 'alice');
  const file = join(clone('alice'), 'team.stash');
  await ok(alice, ['container', 'export', 'team', file]);
  await ok(alice, ['container', 'link', file, '--name', 'team']);
  writeFileSync(join(clone('alice'), '.gitattributes'), '*.stash merge=stash\n');
  await gitOk(alice, clone('alice'), ['add', '.']);
  await gitOk(alice, clone('alice'), ['commit', '-q', '-m', 'team secrets']);
  await gitOk(alice, clone('alice'), ['push', '-q', 'origin', 'main']);
  await gitOk(bob, root.path, ['clone', '-q', origin, clone('bob')]);
  await configure(bob, clone('bob'), 'bob');
  await ok(bob, ['container', 'link', join(clone('bob'), 'team.stash')]);
});

test.after(async () => {
  for (const t of [alice, bob]) await t?.dispose();
  root?.remove();
});

/** `t` changes entries with `sets` ([args, stdin] of `stash set team ...`) and commits them. */
async function commit(t: CliEnv, who: 'alice' | 'bob', sets: Array<[string[], string]>): Promise<void> {
  for (const [args, input] of sets) await ok(t, ['set', 'team', ...args], input);
  await gitOk(t, clone(who), ['commit', '-q', '-am', `${who} changes`]);
}

test('different entries, and a value on one side and its field on the other, merge on git pull', async () => {
  if (!needFacility(haveGit, 'git', 'git is not installed')) return;
  await commit(alice, 'alice', [
    [['API_KEY'], 'sk-alice-1'],
    [['web/github.com'], 'gh-alice-1'],
  ]);
  await gitOk(alice, clone('alice'), ['push', '-q']);
  await commit(bob, 'bob', [
    [['DB_PASSWORD'], 'pg-bob-1'],
    [['web/github.com', '--field', 'username=bob'], ''],
  ]);
  const pull = await gitOk(bob, clone('bob'), ['pull', '--no-edit']);
  assert.match(pull.stderr, /stash: merged shared container team into version \d+, signed by you; from theirs: /);
  assert.is((await gitOk(bob, clone('bob'), ['status', '--porcelain'])).stdout, '', 'merged and committed');
  const parents = (await gitOk(bob, clone('bob'), ['log', '-1', '--format=%P'])).stdout.trim().split(' ');
  assert.is(parents.length, 2, 'a merge commit');
  assert.is(await value(bob, ['API_KEY']), 'sk-alice-1');
  assert.is(await value(bob, ['web/github.com']), 'gh-alice-1');
  assert.is(await value(bob, ['web/github.com', '--field', 'username']), 'bob');
  assert.is(await value(bob, ['DB_PASSWORD']), 'pg-bob-1');
  await gitOk(bob, clone('bob'), ['push', '-q']);
  await gitOk(alice, clone('alice'), ['pull', '-q', '--no-edit']);
  assert.is(await value(alice, ['web/github.com', '--field', 'username']), 'bob', "Alice accepts Bob's merge");
  assert.is(await value(alice, ['DB_PASSWORD']), 'pg-bob-1');
});

test('one entry changed on both sides: git keeps the conflict, named; nothing is lost; merge --base finishes it', async () => {
  if (!needFacility(haveGit, 'git', 'git is not installed')) return;
  await commit(alice, 'alice', [[['API_KEY'], 'sk-alice-2']]);
  await gitOk(alice, clone('alice'), ['push', '-q']);
  await commit(bob, 'bob', [
    [['API_KEY'], 'sk-bob-2'],
    [['DB_PASSWORD'], 'pg-bob-2'],
  ]);
  const ours = readFileSync(join(clone('bob'), 'team.stash'));
  const pull = await git(bob, clone('bob'), ['pull', '--no-edit']);
  assert.is.not(pull.code, 0, pull.stdout);
  assert.match(
    pull.stderr,
    /stash: both sides changed API_KEY \(changed in ours, changed in theirs\) since the common/,
  );
  assert.not.match(pull.stderr, /DB_PASSWORD \(/, 'only the entry both changed is named');
  assert.match(pull.stderr, /git records a conflict in team\.stash, which still holds your version; nothing is lost/);
  assert.match(pull.stdout, /CONFLICT \(content\): Merge conflict in team\.stash/);
  const unmerged = await gitOk(bob, clone('bob'), ['diff', '--name-only', '--diff-filter=U']);
  assert.is(unmerged.stdout, 'team.stash\n');
  assert.ok(readFileSync(join(clone('bob'), 'team.stash')).equals(ours), 'the working tree holds our version');
  assert.is(await value(bob, ['API_KEY']), 'sk-bob-2');

  // By hand, as the message says: theirs wins API_KEY, ours stays in its history.
  const b = clone('bob');
  await showTo(bob, b, ':1:team.stash', join(root!.path, 'base.stash'));
  const theirsFile = join(root!.path, 'theirs.stash');
  await showTo(bob, b, ':3:team.stash', theirsFile);
  const notCommon = await as(bob, ['container', 'merge', 'team', theirsFile, '--base', theirsFile]);
  assert.is(notCommon.code, 84, notCommon.stderr);
  assert.match(
    notCommon.stderr,
    /theirs\.stash \(version \d+\) is not a version that both sides grew from: .*team\.stash/,
  );
  const merged = await ok(bob, [
    'container',
    'merge',
    'team',
    theirsFile,
    '--base',
    join(root!.path, 'base.stash'),
    '--prefer',
    'file',
  ]);
  assert.match(
    merged.stdout,
    /Changed on both sides: API_KEY \(changed in team, changed in .*theirs\.stash\); kept the side of /,
  );
  assert.is(await value(bob, ['API_KEY']), 'sk-alice-2');
  assert.is(await value(bob, ['API_KEY', '--version', '1']), 'sk-bob-2', 'the losing value is in the history');
  assert.is(await value(bob, ['DB_PASSWORD']), 'pg-bob-2');
  await gitOk(bob, b, ['add', 'team.stash']);
  await gitOk(bob, b, ['commit', '-q', '--no-edit']);
  await gitOk(bob, b, ['push', '-q']);
  await gitOk(alice, clone('alice'), ['pull', '-q', '--no-edit']);
  assert.is(await value(alice, ['DB_PASSWORD']), 'pg-bob-2');
});

/** `git show SPEC > dest`, the bytes as they are. */
async function showTo(t: CliEnv, cwd: string, spec: string, dest: string): Promise<void> {
  const r = await git(t, cwd, ['show', spec]);
  assert.is(r.code, 0, r.stderr);
  writeFileSync(dest, r.bytes);
}

test('a driver that cannot unlock the vault (no agent key, no terminal) leaves a conflict, and loses nothing', async () => {
  if (!needFacility(haveGit, 'git', 'git is not installed')) return;
  await commit(alice, 'alice', [[['API_KEY'], 'sk-alice-3']]);
  await gitOk(alice, clone('alice'), ['push', '-q']);
  await commit(bob, 'bob', [[['DB_PASSWORD'], 'pg-bob-3']]);
  await bob.stopAgents(); // no key cached anywhere
  const pull = await git(bob, clone('bob'), ['pull', '--no-edit'], false);
  assert.is.not(pull.code, 0, pull.stdout);
  assert.match(
    pull.stderr,
    /stash: a password is needed but there is no terminal to ask on: .*git records a conflict in team\.stash/,
  );
  assert.match(pull.stderr, /stash container merge team \/tmp\/theirs\.stash --base \/tmp\/base\.stash/);
  assert.is((await as(bob, ['get', 'team', 'DB_PASSWORD'])).stdout, 'pg-bob-3', 'ours is still in place');
  // Once the vault can be unlocked, the same pull merges.
  await gitOk(bob, clone('bob'), ['merge', '--abort']);
  await gitOk(bob, clone('bob'), ['pull', '-q', '--no-edit']);
  assert.is(await value(bob, ['API_KEY']), 'sk-alice-3');
  assert.is(await value(bob, ['DB_PASSWORD']), 'pg-bob-3');
});

test.run();
