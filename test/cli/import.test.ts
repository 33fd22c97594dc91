/**
 * `stash import` through the real binary: a dotenv file comes back equivalent
 * from `stash env --format dotenv`; Bitwarden and 1Password exports with
 * `--flat` give flat names whose TOTP seeds `stash otp` reads (paths and
 * fields: import-structure.test.ts); --dry-run writes nothing and
 * prints no value; a refused or failed import leaves the container exactly as
 * it was (one new version or nothing); the plaintext file is named for
 * deletion.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { parse as dotenvParse } from 'dotenv';
import { cliEnv, snapshot } from './harness.js';
import { copyFixture, holdsNone, importFixture } from './import-files.js';

test('a dotenv file imports in one write and env --format dotenv gives an equivalent file back', async () => {
  const t = cliEnv();
  try {
    await t.initVault(['work']);
    const file = copyFixture(t, 'sample.env');
    const source = dotenvParse(readFileSync(file));
    const values = Object.values(source).filter((v) => v.length > 3);

    const dry = await t.run(['import', 'dotenv', file, '--into', 'work', '--dry-run', '--password-file', t.pwFile]);
    assert.is(dry.code, 0, dry.stderr);
    assert.match(dry.stdout, /^NAME +ACTION +FROM\n/);
    assert.match(dry.stdout, /\nMY_DOTTED_KEY +new +line 13 \(named "my\.dotted-key"\)\n/);
    assert.match(
      dry.stderr,
      /Dry run: nothing was written\. 9 new, 0 to replace; 1 name mapped \(see FROM\); 1 empty value left out\./,
    );
    holdsNone(dry.stdout + dry.stderr, values);
    assert.is((await t.run(['ls', 'work', '--json'])).stdout.trim(), '[]', 'the dry run wrote nothing');

    const r = await t.run(['import', 'dotenv', file, '--into', 'work']);
    assert.is(r.code, 0, r.stderr);
    holdsNone(r.stdout + r.stderr, values);
    assert.match(r.stderr, /Imported 9 entries into work in one new version: 9 new, 0 replaced; 1 name mapped/);
    assert.ok(
      r.stderr.includes(`${file} holds these secrets in plain text: delete it now (shred -u ${file}`),
      r.stderr,
    );

    const back = await t.run(['env', 'work', '--format', 'dotenv']);
    assert.is(back.code, 0, back.stderr);
    const expected: Record<string, string> = {};
    for (const [k, v] of Object.entries(source))
      if (v !== '') expected[/^[A-Za-z_]\w*$/.test(k) ? k : 'MY_DOTTED_KEY'] = v;
    assert.equal(dotenvParse(back.stdout), expected, 'the file read back means the same to dotenv');

    // The same names again: refused, nothing written; --skip-existing keeps them, --overwrite replaces.
    const before = snapshot(t.vault);
    const again = await t.run(['import', 'dotenv', file, '--into', 'work']);
    assert.is(again.code, 73, again.stderr);
    assert.match(
      again.stderr,
      /^stash: work already holds API_TOKEN, DB_PASSWORD, .*; nothing was imported \(add --overwrite to replace them, or --skip-existing to keep them\)\n$/m,
    );
    assert.equal(snapshot(t.vault), before, 'a refused import leaves the container as it was');
    const dryAgain = await t.run(['import', 'dotenv', file, '--into', 'work', '--dry-run']);
    assert.is(dryAgain.code, 73);
    assert.match(dryAgain.stdout, /\nAPI_TOKEN +exists +line 2\n/);
    writeFileSync(file, 'API_TOKEN=changed\nNEW_ONE=fresh\n', { mode: 0o600 });
    const skip = await t.run(['import', 'dotenv', file, '--into', 'work', '--skip-existing']);
    assert.is(skip.code, 0, skip.stderr);
    assert.match(skip.stdout, /API_TOKEN +skip +line 1\nNEW_ONE +new +line 2\n/);
    assert.is((await t.run(['get', 'work', 'API_TOKEN'])).stdout, 'tok-123');
    const over = await t.run(['import', 'dotenv', file, '--into', 'work', '--overwrite']);
    assert.is(over.code, 0, over.stderr);
    assert.match(over.stdout, /API_TOKEN +replace +line 1\n/);
    assert.is((await t.run(['get', 'work', 'API_TOKEN'])).stdout, 'changed');
    const both = await t.run(['import', 'dotenv', file, '--into', 'work', '--overwrite', '--skip-existing']);
    assert.is(both.code, 64);
  } finally {
    await t.dispose();
  }
});

test('a bad line or an oversized value is refused before any password is asked, naming the line; nothing is written', async () => {
  const t = cliEnv();
  try {
    await t.initVault(['work']);
    await t.run(['vault', 'sessions', 'lock-all']);
    const before = snapshot(t.vault);
    const file = join(t.home, 'bad.env');
    writeFileSync(file, 'A=1\nthis-is-a-secret-without-a-key\n', { mode: 0o600 });
    // No password source at all: the file is judged first.
    const r = await t.run(['import', 'dotenv', file, '--into', 'work']);
    assert.is(r.code, 65, r.stderr);
    assert.is(
      r.stderr,
      `stash: ${file} line 2: not KEY=value (nothing was imported; a value over several lines must be quoted)\n`,
    );
    writeFileSync(file, `A=1\nBIG=${'x'.repeat(70_000)}\n`, { mode: 0o600 });
    const big = await t.run(['import', 'dotenv', file, '--into', 'work']);
    assert.is(big.code, 65, big.stderr);
    assert.match(big.stderr, /line 2: the value is 70000 bytes; an entry holds at most 65536/);
    const missing = await t.run(['import', 'dotenv', join(t.home, 'nope.env'), '--into', 'work']);
    assert.is(missing.code, 66, missing.stderr);
    const noContainer = await t.run(['import', 'dotenv', file, '--into', 'nope']);
    assert.is(noContainer.code, 66, noContainer.stderr);
    assert.match(noContainer.stderr, /no container named "nope"/, 'the container is checked before the file');
    // A key assigned twice: dotenv keeps the last value; the import refuses rather than lose one.
    writeFileSync(file, 'A=1\nB=2\nA=3\n', { mode: 0o600 });
    const dup = await t.run(['import', 'dotenv', file, '--into', 'work']);
    assert.is(dup.code, 65, dup.stderr);
    assert.match(dup.stderr, /^stash: .*bad\.env line 3: A is assigned a second time \(first on line 1\)/);
    const noInto = await t.run(['import', 'dotenv', file]);
    assert.is(noInto.code, 64);
    assert.match(noInto.stderr, /missing --into CONTAINER/);
    const format = await t.run(['import', 'keepass', file, '--into', 'work']);
    assert.is(format.code, 64);
    assert.match(format.stderr, /unknown import format "keepass": use one of dotenv, json, pass, bitwarden, 1password/);
    assert.equal(snapshot(t.vault), before);
    // The container is full before the write: the whole import is refused, the container unchanged.
    const many = Array.from({ length: 20 }, (_, i) => `K${i}=${'v'.repeat(60_000)}`).join('\n');
    writeFileSync(file, many, { mode: 0o600 });
    const full = await t.run(['import', 'dotenv', file, '--into', 'work', '--password-file', t.pwFile]);
    assert.is(full.code, 65, full.stderr);
    assert.match(full.stderr, /add up to more than 1048576 bytes/);
  } finally {
    await t.dispose();
  }
});

test('json: what env --format json prints imports back', async () => {
  const t = cliEnv();
  try {
    await t.initVault(['a', 'b']);
    assert.is((await t.run(['set', 'a', 'TOKEN', '--password-file', t.pwFile], { input: 'multi\nline "q"' })).code, 0);
    assert.is((await t.run(['set', 'a', 'OTHER'], { input: 'x' })).code, 0);
    const printed = await t.run(['env', 'a', '--format', 'json']);
    const file = join(t.home, 'a.json');
    writeFileSync(file, printed.stdout, { mode: 0o600 });
    const r = await t.run(['import', 'json', file, '--into', 'b', '--json']);
    assert.is(r.code, 0, r.stderr);
    assert.equal(JSON.parse(r.stdout), [
      { name: 'OTHER', action: 'new', from: 'field "OTHER"', mappedFrom: null },
      { name: 'TOKEN', action: 'new', from: 'field "TOKEN"', mappedFrom: null },
    ]);
    assert.is((await t.run(['get', 'b', 'TOKEN'])).stdout, 'multi\nline "q"');
    // A key given twice: JSON.parse keeps the last value; the import refuses rather than lose one.
    const before = snapshot(t.vault);
    writeFileSync(file, '{"DUP":"first","DUP":"second"}', { mode: 0o600 });
    const dup = await t.run(['import', 'json', file, '--into', 'b', '--password-file', t.pwFile]);
    assert.is(dup.code, 65, dup.stderr);
    assert.is(
      dup.stderr,
      `stash: ${file} line 1, column 16: the key "DUP" is given a second time in one object (first at line 1, column 2), and JSON keeps only the last value; remove one or rename it (nothing was imported)\n`,
    );
    assert.equal(snapshot(t.vault), before);
  } finally {
    await t.dispose();
  }
});

test('--flat: Bitwarden and 1Password exports import logins as flat names: usernames, passwords, TOTP seeds, notes', async () => {
  const t = cliEnv();
  try {
    await t.initVault(['bw', 'op']);
    const bw = await importFixture(t, 'bitwarden', 'bitwarden.json', 'bw', ['--flat']);
    assert.is(bw.code, 0, bw.stderr);
    holdsNone(bw.stdout + bw.stderr, ['hunter2', 'octocat', 'JBSWY3DP', 'recovery', 'correct horse', '4111']);
    assert.match(bw.stdout, /\nGITHUB_PASSWORD_2 +new +item "GitHub" password \(named "GITHUB_PASSWORD"\)\n/);
    assert.match(bw.stderr, /warning: .*only the notes and custom fields were imported of "Visa" \(card\)/);
    const get = async (c: string, n: string): Promise<string> => {
      const r = await t.run(['get', c, n]);
      assert.is(r.code, 0, `${c} ${n}: ${r.stderr}`);
      return r.stdout;
    };
    assert.is(await get('bw', 'GITHUB_USERNAME'), 'octocat');
    assert.is(await get('bw', 'GITHUB_PASSWORD'), 'hunter2-gh');
    assert.is(await get('bw', 'GITHUB_NOTES'), 'recovery codes:\nabcd-efgh\nijkl-mnop');
    assert.is(await get('bw', 'GITHUB_API_KEY'), 'ghp_example');
    const otp = await t.run(['otp', 'bw', 'GITHUB_TOTP', '--json']);
    assert.is(otp.code, 0, otp.stderr);
    assert.equal(Object.keys(JSON.parse(otp.stdout)).sort(), [
      'algorithm',
      'code',
      'digits',
      'expiresInSeconds',
      'period',
    ]);
    assert.match(JSON.parse(otp.stdout).code, /^[0-9]{6}$/);
    const ls = await t.run(['ls', 'bw', '--json']);
    assert.ok(
      (JSON.parse(ls.stdout) as Array<{ name: string; totp: boolean }>).find((e) => e.name === 'GITHUB_TOTP_2')?.totp,
      'ls marks an imported seed',
    );

    const op = await t.run(['import', '1password', copyFixture(t, '1password.csv'), '--into', 'op', '--flat']);
    assert.is(op.code, 0, op.stderr);
    holdsNone(op.stdout + op.stderr, ['p,a', 'r0uter', 'secret-1p', 'JBSWY3DP', 'line two']);
    assert.is(await get('op', 'EXAMPLE_MAIL_USERNAME'), 'alice@example.com');
    assert.is(await get('op', 'EXAMPLE_MAIL_PASSWORD'), 'p,a"ss');
    assert.is(await get('op', 'EXAMPLE_MAIL_NOTES'), 'line one\r\nline two, with a comma');
    const code = await t.run(['otp', 'op', 'EXAMPLE_MAIL_TOTP', '--json']);
    assert.is(code.code, 0, code.stderr);
    assert.equal(
      [JSON.parse(code.stdout).digits, JSON.parse(code.stdout).period, JSON.parse(code.stdout).algorithm],
      [8, 60, 'SHA256'],
    );
    assert.match(JSON.parse(code.stdout).code, /^[0-9]{8}$/);
    assert.is(await get('op', '_1PASSWORD_ACCOUNT_PASSWORD'), 'secret-1p');
  } finally {
    await t.dispose();
  }
});

test.run();
