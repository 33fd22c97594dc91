/**
 * Entry paths and fields through the real binary: `ls` as a tree of paths
 * with field names (never PATH#FIELD keys, never values), `--flat`, one
 * folder, `--json`; `find` over paths; `mv` and `cp` of an entry with its
 * fields (and its history within a container) and of a whole folder, in the
 * CONTAINER/PATH and CONTAINER FROM TO forms; `history`, `rm` and `restore`
 * of one field; `edit` of a path.
 */
import { chmodSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { cliEnv, sharedCliEnv, snapshot, type CliEnv } from './harness.js';

const shared = sharedCliEnv();
test.after(() => shared.dispose());

const SECRETS = ['gh-pass-1', 'pat-user', 'gl-pass-2', 'prod-key-3', 'tok-4'];

/** Fills `c`: web/github.com (username, url), web/gitlab.com, work/aws/prod (notes), API_TOKEN. */
async function fill(t: CliEnv, c: string): Promise<void> {
  for (const [args, input] of [
    [['set', c, 'web/github.com', '--password-file', t.pwFile], 'gh-pass-1'],
    [['set', c, 'web/github.com', '--field', 'username=pat-user', '--field', 'url=https://github.com'], undefined],
    [['set', c, 'web/gitlab.com'], 'gl-pass-2'],
    [['set', c, 'work/aws/prod'], 'prod-key-3'],
    [['set', c, 'work/aws/prod', '--field', 'notes=rotate-monthly'], undefined],
    [['set', c, 'API_TOKEN'], 'tok-4'],
  ] as const) {
    const r = await t.run([...args], input === undefined ? {} : { input });
    assert.is(r.code, 0, r.stderr);
  }
}

/** The first column of each line of a listing, with its indentation. */
const names = (stdout: string): string[] => stdout.split('\n').flatMap((l) => l.match(/^ *\S+/) ?? []);

function noSecrets(...outputs: string[]): void {
  for (const out of outputs)
    for (const s of [...SECRETS, 'rotate-monthly', 'https://github.com'])
      assert.not.ok(out.includes(s), `a value was printed: ${out}`);
}

test('ls shows a tree of paths with field names, never PATH#FIELD keys or values; --flat, a folder, --json', async () => {
  const t = await shared.fresh(['tree']);
  await fill(t, 'tree');
  const ls = await t.run(['ls', 'tree']);
  assert.is(ls.code, 0, ls.stderr);
  const lines = ls.stdout.trimEnd().split('\n');
  const row = (name: string, fields: string) =>
    new RegExp(`^${name} +\\d+ +\\d{4}-\\d\\d-\\d\\d [0-9:]+ UTC +${fields}$`);
  assert.match(lines[0]!, /^NAME +BYTES +CHANGED +FIELDS$/);
  assert.match(lines[1]!, row('API_TOKEN', '-'));
  assert.is(lines[2], 'web/');
  assert.match(lines[3]!, row('  github\\.com', 'url,username'));
  assert.match(lines[4]!, row('  gitlab\\.com', '-'));
  assert.is(lines[5], 'work/');
  assert.is(lines[6], '  aws/');
  assert.match(lines[7]!, row('    prod', 'notes'));
  assert.is(lines.length, 8, ls.stdout);
  assert.not.ok(ls.stdout.includes('#'), 'no stored field key is listed');

  const flat = await t.run(['ls', 'tree', '--flat']);
  assert.equal(names(flat.stdout), ['NAME', 'API_TOKEN', 'web/github.com', 'web/gitlab.com', 'work/aws/prod']);
  for (const folder of ['web/', 'web']) {
    const one = await t.run(['ls', 'tree', folder]);
    assert.is(one.code, 0, one.stderr);
    assert.equal(names(one.stdout), ['NAME', 'web/', '  github.com', '  gitlab.com']);
  }
  const json = await t.run(['ls', 'tree', 'work/', '--json']);
  assert.equal(
    (JSON.parse(json.stdout) as Array<{ name: string; fields: string[] }>).map((e) => [e.name, e.fields]),
    [['work/aws/prod', ['notes']]],
  );
  const all = JSON.parse((await t.run(['ls', 'tree', '--json'])).stdout) as Array<{ name: string }>;
  assert.equal(
    all.map((e) => e.name),
    ['API_TOKEN', 'web/github.com', 'web/gitlab.com', 'work/aws/prod'],
  );
  const none = await t.run(['ls', 'tree', 'mail/']);
  assert.is(none.code, 66, none.stderr);
  assert.is(none.stderr, 'stash: container "tree" has no entry under mail/ (its top folders: web/, work/)\n');
  const entry = await t.run(['ls', 'tree', 'API_TOKEN']);
  assert.is(entry.code, 66, entry.stderr);
  assert.match(entry.stderr, /API_TOKEN is an entry, not a folder \(stash get tree API_TOKEN\)/);
  assert.is((await t.run(['ls', 'tree', 'web//'])).code, 64);
  noSecrets(ls.stdout, flat.stdout, json.stdout, ls.stderr);
});

test('find matches paths by substring and glob and never lists a field', async () => {
  const t = cliEnv();
  try {
    await t.initVault(['vault1']);
    await fill(t, 'vault1');
    const sub = await t.run(['find', 'git']);
    assert.is(sub.code, 0, sub.stderr);
    assert.is(sub.stdout, 'vault1/web/github.com\nvault1/web/gitlab.com\n');
    const glob = await t.run(['find', 'work/*', '--json']);
    assert.equal(JSON.parse(glob.stdout), [{ container: 'vault1', name: 'work/aws/prod' }]);
    // "user" is only a field name (web/github.com#username): no match.
    assert.is((await t.run(['find', 'user'])).code, 1);
    assert.is((await t.run(['find', '*#*'])).code, 1);
    noSecrets(sub.stdout, glob.stdout);
  } finally {
    await t.dispose();
  }
});

test('mv and cp: an entry goes with its fields and history; a folder moves whole; CONTAINER FROM TO', async () => {
  const t = await shared.fresh(['src', 'dst']);
  await fill(t, 'src');
  const get = async (c: string, p: string, ...more: string[]): Promise<string> => {
    const r = await t.run(['get', c, p, ...more]);
    assert.is(r.code, 0, `${c} ${p} ${more.join(' ')}: ${r.stderr}`);
    return r.stdout;
  };
  const paths = async (c: string): Promise<string[]> =>
    (JSON.parse((await t.run(['ls', c, '--json'])).stdout) as Array<{ name: string }>).map((e) => e.name);
  // A previous value of the username, to see the history go along.
  assert.is((await t.run(['set', 'src', 'web/github.com', '--field', 'username=pat-2'])).code, 0);

  const mv = await t.run(['mv', 'src/web/github.com', 'src/code/github.com']);
  assert.is(mv.code, 0, mv.stderr);
  assert.is(mv.stderr, 'Moved src/web/github.com to src/code/github.com.\n');
  assert.is(await get('src', 'code/github.com'), 'gh-pass-1');
  assert.is(await get('src', 'code/github.com', '--field', 'username'), 'pat-2');
  assert.is(await get('src', 'code/github.com', '--field', 'url'), 'https://github.com');
  assert.is(await get('src', 'code/github.com', '--field', 'username', '--version', '1'), 'pat-user');
  assert.is((await t.run(['get', 'src', 'web/github.com'])).code, 66);

  // The folder form, three arguments: web/ (gitlab.com) joins code/ as sites/.
  const folder = await t.run(['mv', 'src', 'code/', 'sites/']);
  assert.is(folder.code, 0, folder.stderr);
  assert.is(folder.stderr, 'Moved src/code/ to src/sites/ (1 entry).\n');
  // A folder source makes a target without its '/' a folder too.
  const bare = await t.run(['mv', 'src/web/', 'src/sites']);
  assert.is(bare.code, 0, bare.stderr);
  assert.is(bare.stderr, 'Moved src/web/ to src/sites/ (1 entry).\n');
  assert.equal(await paths('src'), ['API_TOKEN', 'sites/github.com', 'sites/gitlab.com', 'work/aws/prod']);

  // cp of a folder to another container keeps the paths (dst/) and the fields; the source stays.
  const cp = await t.run(['cp', 'src/sites/', 'dst/']);
  assert.is(cp.code, 0, cp.stderr);
  assert.is(cp.stderr, 'Copied src/sites/ to dst/sites/ (2 entries).\n');
  assert.is(await get('dst', 'sites/github.com', '--field', 'url'), 'https://github.com');
  const copied = await t.run(['history', 'dst', 'sites/github.com', '--field', 'username', '--json']);
  assert.is((JSON.parse(copied.stdout) as { versions: unknown[] }).versions.length, 0, 'a copy takes no history');
  // Again: every target exists, refused without --force and nothing written.
  const before = snapshot(t.vault);
  const again = await t.run(['cp', 'src/sites/', 'dst/']);
  assert.is(again.code, 73, again.stderr);
  assert.is(
    again.stderr,
    'stash: dst/sites/github.com, dst/sites/gitlab.com already exist; nothing was copied (--force replaces them)\n',
  );
  assert.equal(snapshot(t.vault), before);

  // --force replaces an entry whole: a field the moved entry lacks is not left behind.
  assert.is((await t.run(['set', 'dst', 'plain'], { input: 'plain-v' })).code, 0);
  const forced = await t.run(['mv', 'dst/plain', 'dst/sites/github.com', '--force']);
  assert.is(forced.code, 0, forced.stderr);
  assert.is(await get('dst', 'sites/github.com'), 'plain-v');
  assert.is((await t.run(['get', 'dst', 'sites/github.com', '--field', 'url'])).code, 66);

  // An entry into a folder keeps its last segment; across containers the source is removed.
  const into = await t.run(['mv', 'src/work/aws/prod', 'dst/cloud/']);
  assert.is(into.code, 0, into.stderr);
  assert.is(into.stderr, 'Moved src/work/aws/prod to dst/cloud/prod.\n');
  assert.is(await get('dst', 'cloud/prod', '--field', 'notes'), 'rotate-monthly');
  assert.equal(await paths('src'), ['API_TOKEN', 'sites/github.com', 'sites/gitlab.com']);

  for (const p of ['loop/x', 'loop/loop/x']) assert.is((await t.run(['set', 'src', p], { input: 'v' })).code, 0);
  for (const [args, code, re] of [
    [['mv', 'src', 'loop/', 'loop/loop/'], 64, /overlap: src\/loop\/loop\/x would be written while it is moved itself/],
    [['mv', 'src', 'sites/', 'sites'], 64, /is the source and the target/],
    [['mv', 'src', 'mail/', 'post/'], 66, /has no entry under mail\//],
    [['mv', 'src/web/', 'src//x'], 64, /invalid entry name/],
    [['cp', 'src', 'API_TOKEN', 'a/../b'], 64, /invalid entry name/],
    [['mv', 'src', 'API_TOKN', 'X'], 66, /has no entry API_TOKN/],
  ] as const) {
    const r = await t.run([...args]);
    assert.is(r.code, code, `${args.join(' ')}: ${r.stderr}`);
    assert.match(r.stderr, re);
  }
  noSecrets(mv.stdout, folder.stdout, cp.stdout, into.stdout, mv.stderr, cp.stderr);
});

test('history, rm and restore of one field; rm of the entry takes its fields', async () => {
  const t = await shared.fresh(['fields']);
  await fill(t, 'fields');
  const p = 'web/github.com';
  assert.is((await t.run(['set', 'fields', p, '--field', 'username=pat-2'])).code, 0);
  const history = await t.run(['history', 'fields', p, '--field', 'username', '--json']);
  assert.is(history.code, 0, history.stderr);
  const h = JSON.parse(history.stdout) as { name: string; field: string; versions: unknown[] };
  assert.equal([h.name, h.field, h.versions.length], [p, 'username', 1]);
  const valueHistory = JSON.parse((await t.run(['history', 'fields', p, '--json'])).stdout) as { versions: unknown[] };
  assert.is(valueHistory.versions.length, 0, 'a field write is not a value write');

  const rm = await t.run(['rm', 'fields', p, '--field', 'username']);
  assert.is(rm.code, 0, rm.stderr);
  assert.is(
    rm.stderr,
    `Removed field username of ${p} from fields; its previous values are kept (stash history fields ${p} --field username; rm --purge drops them).\n`,
  );
  assert.is((await t.run(['get', 'fields', p])).stdout, 'gh-pass-1', 'the value stays');
  assert.is(
    (await t.run(['get', 'fields', p, '--field', 'url'])).stdout,
    'https://github.com',
    'the other field stays',
  );
  const missing = await t.run(['rm', 'fields', p, '--field', 'username']);
  assert.is(missing.code, 66, missing.stderr);
  assert.match(missing.stderr, /has no field username \(its fields: url\)/);
  const removed = await t.run(['history', 'fields', p, '--field', 'username']);
  assert.match(
    removed.stdout,
    /field username of web\/github\.com was removed; stash restore fields web\/github\.com --field username --version 1/,
  );

  const restore = await t.run(['restore', 'fields', p, '--field', 'username', '--version', '1']);
  assert.is(restore.code, 0, restore.stderr);
  assert.is((await t.run(['get', 'fields', p, '--field', 'username'])).stdout, 'pat-2');

  assert.is((await t.run(['rm', 'fields', p])).code, 0);
  const left = JSON.parse((await t.run(['ls', 'fields', '--json'])).stdout) as Array<{ name: string }>;
  assert.equal(
    left.map((e) => e.name),
    ['API_TOKEN', 'web/gitlab.com', 'work/aws/prod'],
  );
  assert.is((await t.run(['get', 'fields', p, '--field', 'url'])).code, 66, 'the fields went with the entry');
});

test('edit takes a path, and --field edits one field', async () => {
  const t = await shared.fresh(['edits']);
  await fill(t, 'edits');
  const editor = join(t.home, 'append-edited.sh');
  // Records the file name it was given, then appends to the value.
  writeFileSync(editor, '#!/bin/sh\nbasename "$1" > "$HOME/edited-name"\nprintf -- "-edited" >> "$1"\n');
  chmodSync(editor, 0o755);
  const env = { VISUAL: editor, EDITOR: undefined, XDG_RUNTIME_DIR: undefined };
  const r = await t.run(['edit', 'edits', 'web/github.com', '--insecure-tmp'], { env });
  assert.is(r.code, 0, r.stderr);
  assert.is((await t.run(['get', 'edits', 'web/github.com'])).stdout, 'gh-pass-1-edited');
  assert.is(readFileSync(join(t.home, 'edited-name'), 'utf8'), 'github.com\n', 'the file is named by the last segment');
  const f = await t.run(['edit', 'edits', 'work/aws/prod', '--field', 'notes', '--insecure-tmp'], { env });
  assert.is(f.code, 0, f.stderr);
  assert.is((await t.run(['get', 'edits', 'work/aws/prod', '--field', 'notes'])).stdout, 'rotate-monthly-edited');
  assert.is((await t.run(['get', 'edits', 'work/aws/prod'])).stdout, 'prod-key-3', 'the value is untouched');
});

test.run();
