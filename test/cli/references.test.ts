/**
 * Secret references through the real CLI: `stash read`, `stash run` (the
 * environment, dotenv files, --file, --mask, --no-inherit, unknown references
 * refused before the command runs), `stash inject` (stdout and a 0600 file,
 * nothing written on a missing reference) and the multi-container `stash env`
 * (--prefer, --only, --format dotenv|json|shell read back by their readers).
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse as parseDotenv } from 'dotenv';
import { Concealer } from '../../src/cli/mask-stream.js';
import { inMemory } from '../../src/cli/memory-folder.js';
import { parseRef } from '../../src/cli/refs/reference.js';
import { scanTemplate } from '../../src/cli/refs/template.js';
import { cliEnv, type CliEnv } from './harness.js';

async function setup(): Promise<CliEnv> {
  const t = cliEnv();
  await t.initVault(['work', 'ci']);
  const set = async (c: string, n: string, v: string): Promise<void> => {
    const r = await t.run(['set', c, n, '--raw', '--password-file', t.pwFile], { input: v });
    assert.is(r.code, 0, r.stderr);
  };
  await set('work', 'API_TOKEN', 'tok-work-123');
  await set('work', 'DB_PASSWORD', 'pw with "quotes" and $dollar');
  await set('work', 'PEM', '-----BEGIN X-----\nline\n-----END X-----\n');
  await set('ci', 'API_TOKEN', 'tok-ci-456');
  await set('ci', 'CI_ONLY', "it's");
  return t;
}

test('references parse, with errors that name the problem', () => {
  assert.equal(parseRef('stash://work/API_TOKEN'), {
    container: 'work',
    path: 'API_TOKEN',
    field: null,
    key: 'API_TOKEN',
    text: 'stash://work/API_TOKEN',
  });
  assert.equal(parseRef('stash://work/web/github.com#username'), {
    container: 'work',
    path: 'web/github.com',
    field: 'username',
    key: 'web/github.com#username',
    text: 'stash://work/web/github.com#username',
  });
  assert.is(parseRef('stash://my%2Dteam/KEY').container, 'my-team', 'percent-escapes are decoded');
  assert.is(parseRef('stash://work/9KEY').path, '9KEY', 'a path segment may start with a digit');
  assert.throws(() => parseRef('stash://work'), /stash:\/\/CONTAINER\/PATH or stash:\/\/CONTAINER\/PATH#FIELD/);
  assert.throws(() => parseRef('stash://wo rk/KEY'), /not a container name/);
  assert.throws(() => parseRef('stash://work/a//b'), /not an entry path \(it has an empty segment/);
  assert.throws(() => parseRef('stash://work/a/../b'), /not an entry path \(it has a segment "\.\."\)/);
  assert.throws(() => parseRef('stash://work/a#User'), /"User" is not a field name/);
  const scan = scanTemplate('a {{stash://w/A}} b {{  stash://w/B  }} {{stash://w/A}}');
  assert.equal(
    scan.refs.map((r) => r.key),
    ['A', 'B'],
    'each distinct reference once',
  );
  assert.equal([...scan.spans], [2, 17, 0, 20, 39, 1, 40, 55, 0]);
});

test('--mask conceals values split across chunks, and leaves short values and other text alone', () => {
  const c = new Concealer([Buffer.from('secret-value'), Buffer.from('ab')]);
  const out = Buffer.concat([
    c.push(Buffer.from('x secr')),
    c.push(Buffer.from('et-value y ab')),
    c.push(Buffer.from(' secret-val')),
    c.end(),
  ]).toString();
  assert.is(out, 'x <concealed by stash> y ab secret-val');
});

test('read, run (environment, dotenv file, --file, --mask, --no-inherit), unknown references refused before the command', async () => {
  const t = await setup();
  try {
    assert.is((await t.run(['read', 'stash://work/API_TOKEN'])).stdout, 'tok-work-123');
    const env = { FOO: 'stash://work/API_TOKEN' };
    const r = await t.run(['run', '--', 'sh', '-c', 'printf %s "$FOO"'], { env });
    assert.is(r.code, 0, r.stderr);
    assert.is(r.stdout, 'tok-work-123');
    const dotenv = join(t.home, 'app.env');
    writeFileSync(
      dotenv,
      '# app settings\nexport DB="stash://work/DB_PASSWORD"\nPLAIN=hello\nCI=stash://ci/API_TOKEN\n',
    );
    const fromFile = await t.run([
      'run',
      '--env-file',
      dotenv,
      '--',
      'sh',
      '-c',
      'printf "%s|%s|%s" "$DB" "$PLAIN" "$CI"',
    ]);
    assert.is(fromFile.stdout, 'pw with "quotes" and $dollar|hello|tok-ci-456', fromFile.stderr);
    // Unknown references: an error, and the command never ran.
    const marker = join(t.home, 'ran');
    for (const bad of ['stash://work/NOPE', 'stash://nowhere/API_TOKEN', 'stash://work']) {
      const refused = await t.run(['run', '--', 'sh', '-c', `touch ${marker}`], { env: { FOO: bad } });
      assert.ok(refused.code !== 0, bad);
      assert.ok(!existsSync(marker), `${bad}: the command must not run`);
    }
    assert.match(
      (await t.run(['run', '--', 'true'], { env: { FOO: 'stash://work/API_TOKN' } })).stderr,
      /did you mean API_TOKEN\?/,
    );
    // --file: a 0600 file in a 0700 folder under XDG_RUNTIME_DIR (a tmpfs) while the command runs, gone
    // afterwards. Where the folder goes when XDG_RUNTIME_DIR is not one: test/cli/memory-folder.test.ts.
    if (inMemory('/dev/shm') === true) {
      const runtime = mkdtempSync('/dev/shm/stash-references-test-');
      try {
        const file = await t.run(
          [
            'run',
            '--file',
            'PEM_FILE=stash://work/PEM',
            '--',
            'sh',
            '-c',
            'stat -c "%a %n" "$PEM_FILE" "$(dirname "$PEM_FILE")"; cat "$PEM_FILE"',
          ],
          { env: { XDG_RUNTIME_DIR: runtime } },
        );
        assert.is(file.code, 0, file.stderr);
        assert.match(
          file.stdout,
          new RegExp(
            `^600 ${runtime}/stash-run-\\w+/PEM_FILE\\n700 ${runtime}/stash-run-\\w+\\n-----BEGIN X-----\\nline\\n-----END X-----\\n$`,
          ),
        );
        assert.equal(readdirSync(runtime), [], 'the file and its folder are removed');
      } finally {
        rmSync(runtime, { recursive: true, force: true });
      }
    }
    // --mask: the value never reaches our stdout or stderr.
    const masked = await t.run(['run', '--mask', '--', 'sh', '-c', 'echo "token=$FOO"; echo "err $FOO" >&2'], { env });
    assert.is(masked.stdout, 'token=<concealed by stash>\n', JSON.stringify(masked));
    assert.is(masked.stderr, 'err <concealed by stash>\n');
    // --no-inherit: only the kept variables and the env files.
    const bare = await t.run(
      [
        'run',
        '--no-inherit',
        '--env-file',
        dotenv,
        '--',
        'sh',
        '-c',
        'printf "%s|%s" "${SECRET_FROM_PARENT:-unset}" "$PLAIN"',
      ],
      { env: { SECRET_FROM_PARENT: 'x' } },
    );
    assert.is(bare.stdout, 'unset|hello', bare.stderr);
  } finally {
    await t.dispose();
  }
});

test('inject fills a template to stdout or to a 0600 file; a missing reference writes nothing', async () => {
  const t = await setup();
  try {
    const template = join(t.home, 'config.tpl');
    writeFileSync(template, 'token: {{ stash://work/API_TOKEN }}\nci: {{stash://ci/API_TOKEN}}\n');
    const out = await t.run(['inject', '-i', template]);
    assert.is(out.stdout, 'token: tok-work-123\nci: tok-ci-456\n', out.stderr);
    const piped = await t.run(['inject'], { input: 'x={{ stash://work/API_TOKEN }}' });
    assert.is(piped.stdout, 'x=tok-work-123');
    const target = join(t.home, 'config.yml');
    const written = await t.run(['inject', '-i', template, '-o', target]);
    assert.is(written.code, 0, written.stderr);
    assert.is(readFileSync(target, 'utf8'), 'token: tok-work-123\nci: tok-ci-456\n');
    assert.is(statSync(target).mode & 0o777, 0o600);
    writeFileSync(template, 'a: {{ stash://work/API_TOKEN }}\nb: {{ stash://work/MISSING }}\n');
    const other = join(t.home, 'other.yml');
    const missing = await t.run(['inject', '-i', template, '-o', other]);
    assert.is(missing.code, 66);
    assert.match(missing.stderr, /stash:\/\/work\/MISSING/);
    assert.ok(!existsSync(other), 'nothing written');
    assert.is((await t.run(['inject', '-i', template])).stdout, '', 'nothing on stdout either');
  } finally {
    await t.dispose();
  }
});

test('inject fills 100,000 references (two containers, four entries, spelt several ways), ASCII or not', async () => {
  const t = await setup();
  try {
    // Each entry under another spelling: spaces inside the braces, a %-escape. Each line holds all four.
    const refs: Array<[string, string]> = [
      ['{{stash://work/API_TOKEN}}', 'tok-work-123'],
      ['{{ stash://ci/API_TOKEN }}', 'tok-ci-456'],
      ['{{stash://ci/%43I_ONLY}}', "it's"],
      ['{{  stash://work/DB_PASSWORD}}', 'pw with "quotes" and $dollar'],
    ];
    const lines: string[] = [];
    const filled: string[] = [];
    for (let i = 0; i < 25_000; i++) {
      lines.push(`${i}: ${refs.map(([r]) => r).join(' ')}\n`);
      filled.push(`${i}: ${refs.map(([, v]) => v).join(' ')}\n`);
    }
    const template = join(t.home, 'big.tpl');
    for (const head of ['', 'naïve → ünïcode {{stash://work/API_TOKEN}}\n']) {
      writeFileSync(template, head + lines.join(''));
      const r = await t.run(['inject', '-i', template], { timeoutMs: 60_000 });
      assert.is(r.code, 0, r.stderr);
      assert.ok(
        r.stdout === head.replace('{{stash://work/API_TOKEN}}', 'tok-work-123') + filled.join(''),
        'the filled text',
      );
    }
  } finally {
    await t.dispose();
  }
});

test('env with several containers: a clash needs --prefer; --only; --format dotenv, json and shell read back exactly', async () => {
  const t = await setup();
  try {
    const clash = await t.run(['env', 'work', 'ci', '--', 'true']);
    assert.is(clash.code, 64);
    assert.match(clash.stderr, /API_TOKEN is in more than one of work, ci; say which wins with --prefer CONTAINER/);
    const both = await t.run([
      'env',
      'work',
      'ci',
      '--prefer',
      'ci',
      '--',
      'sh',
      '-c',
      'printf "%s|%s" "$API_TOKEN" "$CI_ONLY"',
    ]);
    assert.is(both.stdout, "tok-ci-456|it's", both.stderr);
    const only = await t.run([
      'env',
      'work',
      '--only',
      'API_TOKEN',
      '--',
      'sh',
      '-c',
      'printf "%s|%s" "$API_TOKEN" "${DB_PASSWORD:-unset}"',
    ]);
    assert.is(only.stdout, 'tok-work-123|unset');
    assert.match(
      (await t.run(['env', 'work', '--only', 'NOPE', '--', 'true'])).stderr,
      /--only names NOPE, which is in none of work/,
    );
    const expected = {
      API_TOKEN: 'tok-ci-456',
      CI_ONLY: "it's",
      DB_PASSWORD: 'pw with "quotes" and $dollar',
      PEM: '-----BEGIN X-----\nline\n-----END X-----\n',
    };
    const dotenv = await t.run(['env', 'work', 'ci', '--prefer', 'ci', '--format', 'dotenv']);
    assert.is(dotenv.code, 0, dotenv.stderr);
    assert.equal(parseDotenv(dotenv.stdout), expected, 'dotenv parses it back to the same values');
    const json = await t.run(['env', 'work', 'ci', '--prefer', 'ci', '--format', 'json']);
    assert.equal(JSON.parse(json.stdout), expected);
    const shell = await t.run(['env', 'work', 'ci', '--prefer', 'ci', '--format', 'shell']);
    const file = join(t.home, 'vars.sh');
    writeFileSync(file, shell.stdout);
    const sourced = spawnSync('sh', [
      '-c',
      `. ${file}; printf '%s\\n%s\\n%s' "$CI_ONLY" "$DB_PASSWORD" "$PEM"`,
    ]).stdout.toString();
    assert.is(sourced, `it's\npw with "quotes" and $dollar\n${expected.PEM}`);
    assert.match((await t.run(['env', 'work', '--format', 'yaml'])).stderr, /--format must be dotenv, json or shell/);
    assert.match((await t.run(['env', 'work', '--format', 'json', '--', 'true'])).stderr, /does not run a command/);
    assert.match((await t.run(['env', 'work'])).stderr, /missing -- CMD/);
  } finally {
    await t.dispose();
  }
});

test.run();
