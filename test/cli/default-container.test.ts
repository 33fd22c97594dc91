/**
 * The default container (cli.default_container, STASH_CONTAINER): a
 * one-argument `stash get PATH` and its kin (set, rm, ls with none, edit, otp,
 * history) work on it; with two arguments the first is always the container;
 * without a default a one-argument call is a usage error that says how to set
 * one. And a name is parsed once: one `stash get` runs the container name rule
 * and the entry path rule once each (STASH_TEST_COUNT_VALIDATIONS, docs/testing.md).
 * Bad values of the setting are config-errors.test.ts's.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { chmodSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { sharedCliEnv, type CliEnv } from './harness.js';

// Every test here reads and writes entries of its own containers: one vault and agent for all of them.
const shared = sharedCliEnv();
test.after(() => shared.dispose());

const SEED = 'GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ';

/** A config file of its own (named by STASH_CONFIG per run, so the other tests never read it). */
function configFile(t: CliEnv, name: string, text: string): string {
  const path = join(t.home, `${name}.toml`);
  writeFileSync(path, text);
  return path;
}

async function ok(t: CliEnv, args: string[], opts: { input?: string; env?: NodeJS.ProcessEnv } = {}): Promise<string> {
  const r = await t.run(args, opts);
  assert.is(r.code, 0, `${args.join(' ')}: ${r.stderr}`);
  return r.stdout;
}

test('STASH_CONTAINER: one argument names a path in it for set, get, ls, history, edit, otp and rm', async () => {
  const t = await shared.fresh(['dflt', 'dflt-other']);
  const env = { STASH_CONTAINER: 'dflt' };
  await ok(t, ['set', 'web/github.com'], { input: 'v1\n', env });
  await ok(t, ['set', 'web/github.com', '--field', 'username=pat'], { env });
  assert.is(await ok(t, ['get', 'web/github.com'], { env }), 'v1');
  assert.is(await ok(t, ['get', 'dflt', 'web/github.com']), 'v1', 'stored in the default container');
  assert.is(await ok(t, ['get', 'web/github.com', '--field', 'username'], { env }), 'pat');
  await ok(t, ['set', 'web/github.com'], { input: 'v2\n', env });
  assert.match(await ok(t, ['ls', '--flat'], { env }), /\nweb\/github\.com +2 /);
  assert.match(
    await ok(t, ['ls', 'web/'], { env }),
    /\n {2}github\.com +2 /,
    'one argument with a / is a folder of it',
  );
  const history = JSON.parse(await ok(t, ['history', 'web/github.com', '--json'], { env })) as {
    container: string;
    versions: unknown[];
  };
  assert.is(history.container, 'dflt');
  assert.is(history.versions.length, 1);

  const editor = join(t.home, 'dflt-editor.sh');
  writeFileSync(editor, '#!/bin/sh\nprintf edited > "$1"\n');
  chmodSync(editor, 0o700);
  // A one-segment name: the edit of a path is item 1's (its file is named after the path).
  await ok(t, ['set', 'note'], { input: 'before\n', env });
  await ok(t, ['edit', 'note', '--insecure-tmp'], { env: { ...env, EDITOR: editor, VISUAL: '' } });
  assert.is(await ok(t, ['get', 'dflt', 'note']), 'edited');

  await ok(t, ['set', 'totp/github', '--totp', '-'], { input: `${SEED}\n`, env });
  assert.match(await ok(t, ['otp', 'totp/github'], { env }), /^[0-9]{6}$/);

  // Two arguments: the first is the container, whatever the default.
  await ok(t, ['set', 'dflt-other', 'web/github.com'], { input: 'other\n', env });
  assert.is(await ok(t, ['get', 'dflt-other', 'web/github.com'], { env }), 'other');
  assert.is(await ok(t, ['get', 'web/github.com'], { env }), 'v2');

  await ok(t, ['rm', 'web/github.com'], { env });
  const gone = await t.run(['get', 'dflt', 'web/github.com']);
  assert.is(gone.code, 66, gone.stderr);
  assert.is(await ok(t, ['get', 'dflt-other', 'web/github.com']), 'other', 'rm took the default container only');
});

test('cli.default_container in the config file, and STASH_CONTAINER wins over it', async () => {
  const t = await shared.fresh(['dflt-file', 'dflt-env']);
  await ok(t, ['set', 'dflt-file', 'k'], { input: 'from-file\n' });
  await ok(t, ['set', 'dflt-env', 'k'], { input: 'from-env\n' });
  const config = configFile(t, 'dflt-file', '[cli]\ndefault_container = "dflt-file"\n');
  assert.is(await ok(t, ['get', 'k'], { env: { STASH_CONFIG: config } }), 'from-file');
  assert.match(await ok(t, ['ls'], { env: { STASH_CONFIG: config } }), /\nk +9 /);
  assert.is(await ok(t, ['get', 'k'], { env: { STASH_CONFIG: config, STASH_CONTAINER: 'dflt-env' } }), 'from-env');
});

test('without a default container a one-argument call is a usage error (64) naming both ways to set one', async () => {
  const t = await shared.fresh(['dflt-none']);
  await ok(t, ['set', 'dflt-none', 'k'], { input: 'v\n' });
  const config = configFile(t, 'dflt-none', '[cli]\nclip_seconds = 30\n');
  const calls: Array<[string[], RegExp]> = [
    [['get', 'k'], /stash get k names no container/],
    [['set', 'k'], /stash set k names no container/],
    [['rm', 'k'], /stash rm k names no container/],
    [['edit', 'k'], /stash edit k names no container/],
    [['otp', 'k'], /stash otp k names no container/],
    [['history', 'k'], /stash history k names no container/],
    [['ls'], /stash ls names no container/],
  ];
  for (const [args, names] of calls) {
    const r = await t.run(args, { input: 'x\n', env: { STASH_CONFIG: config } });
    assert.is(r.code, 64, `${args.join(' ')}: ${r.stderr}`);
    assert.match(r.stderr, names);
    assert.ok(r.stderr.includes(`default_container = "NAME" in the [cli] table of ${config}`), r.stderr);
    assert.match(r.stderr, /or with STASH_CONTAINER=NAME\n$/);
    assert.match(r.stderr, /give it first \(stash [a-z]+ CONTAINER/);
  }
  assert.is(await ok(t, ['get', 'dflt-none', 'k']), 'v', 'nothing was changed');
  const none = await t.run(['get']);
  assert.is(none.code, 64);
  assert.match(none.stderr, /^stash: missing argument: PATH\n/);
});

test('help and usage show [CONTAINER] PATH (ls: [CONTAINER] [FOLDER])', async () => {
  const t = await shared.fresh([]);
  for (const command of ['get', 'set', 'rm', 'edit', 'otp', 'history']) {
    const help = await ok(t, [command, '--help']);
    assert.match(help, new RegExp(`^usage: stash ${command} \\[options\\] \\[CONTAINER\\] PATH\\n`));
  }
  assert.match(await ok(t, ['ls', '--help']), /^usage: stash ls \[options\] \[CONTAINER\] \[FOLDER\]\n/);
});

// One line at exit with STASH_TEST_COUNT_VALIDATIONS=1 (src/cli/main.ts).
const ONCE = /^stash-test: validations \{"containerName":1,"entryPath":1\}$/m;

test('one stash get validates the container name and the entry path once each (key cached or not)', async () => {
  const t = await shared.fresh(['dflt-count']);
  await ok(t, ['set', 'dflt-count', 'web/github.com'], { input: 'v\n' });
  const count = { STASH_TEST_COUNT_VALIDATIONS: '1' };
  const cached = await t.run(['get', 'dflt-count', 'web/github.com'], { env: count });
  assert.is(cached.code, 0, cached.stderr);
  assert.match(cached.stderr, ONCE);
  assert.is(cached.stdout, 'v');
  // The key from the password: the container's header is read and its key unwrapped as well.
  await ok(t, ['vault', 'sessions', 'lock-all']);
  const unlocked = await t.run(['get', 'dflt-count', 'web/github.com', '--password-file', t.pwFile], { env: count });
  assert.is(unlocked.code, 0, unlocked.stderr);
  assert.match(unlocked.stderr, ONCE);
  // From the default container: its name is checked as the setting is read, and only then.
  const config = configFile(t, 'dflt-count', '[cli]\ndefault_container = "dflt-count"\n');
  for (const env of [{ STASH_CONTAINER: 'dflt-count' }, { STASH_CONFIG: config }]) {
    const r = await t.run(['get', 'web/github.com'], { env: { ...count, ...env } });
    assert.is(r.code, 0, r.stderr);
    assert.match(r.stderr, ONCE);
  }
});

test.run();
