/**
 * Values that an environment variable or a printed env file cannot carry
 * exactly (issue 40, item 5): bytes that are not UTF-8 reached the child of
 * `stash env` and `stash run`, and the output of `stash env --format`, as
 * U+FFFD without a word. Now they are refused (65) by name before anything
 * runs or is printed, with `stash run --file`, which carries every byte, as
 * the way out; a NUL byte where the carrier drops it (a shell line, `run`'s
 * environment) likewise. UTF-8 values work as before.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { parse as parseDotenv } from 'dotenv';
import { cliEnv, type CliEnv } from './harness.js';

/** Not UTF-8 (0xff 0xfe start no character); the tail lets a test see that no byte of it leaks. */
const NOT_UTF8 = Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from('bin-tail-s3cret')]);

async function setup(): Promise<CliEnv> {
  const t = cliEnv();
  await t.initVault(['c']);
  const set = async (name: string, value: Buffer | string): Promise<void> => {
    const r = await t.run(['set', 'c', name, '--raw', '--password-file', t.pwFile], { input: value });
    assert.is(r.code, 0, r.stderr);
  };
  await set('BIN', NOT_UTF8);
  await set('TEXT', 'grüße ✓ text-s3cret');
  return t;
}

test('env -- CMD: a value that is not UTF-8 is refused by name before CMD runs; --only and run --file are the ways out', async () => {
  const t = await setup();
  try {
    const marker = join(t.home, 'ran');
    const r = await t.run(['env', 'c', '--', 'sh', '-c', `touch ${marker}`]);
    assert.is(r.code, 65, r.stderr);
    assert.is(
      r.stderr,
      'stash: the value of BIN in c is not UTF-8 text, which an environment variable set by stash cannot carry exactly ' +
        '(its bytes would change); nothing was run (pass it as a file, which keeps every byte: ' +
        'stash run --file BIN=stash://c/BIN -- CMD, and leave BIN out here with --only)\n',
    );
    assert.not.ok(existsSync(marker), 'the command did not run');
    // UTF-8 values reach the child as before.
    const script = 'process.stdout.write(JSON.stringify(process.env.TEXT))';
    const only = await t.run(['env', 'c', '--only', 'TEXT', '--', process.execPath, '-e', script]);
    assert.is(only.code, 0, only.stderr);
    assert.is(JSON.parse(only.stdout), 'grüße ✓ text-s3cret');
    // --file carries the bytes exactly.
    const runtime = join(t.home, 'runtime');
    mkdirSync(runtime, { mode: 0o700 });
    const file = await t.run(
      ['run', '--file', 'F=stash://c/BIN', '--', 'sh', '-c', 'od -An -tx1 "$F" | tr -d " \\n"'],
      {
        env: { XDG_RUNTIME_DIR: runtime },
      },
    );
    assert.is(file.code, 0, file.stderr);
    assert.is(file.stdout, NOT_UTF8.toString('hex'));
  } finally {
    await t.dispose();
  }
});

test('run: a reference to a value that is not UTF-8, or that holds a NUL byte, is refused (65) naming the variable', async () => {
  const t = await setup();
  try {
    const r = await t.run(['run', '--', 'sh', '-c', 'printf %s "$FOO"'], { env: { FOO: 'stash://c/BIN' } });
    assert.is(r.code, 65, r.stderr);
    assert.is(
      r.stdout + r.stderr,
      'stash: FOO=stash://c/BIN: the value is not UTF-8 text, which an environment variable set by stash cannot carry exactly ' +
        '(its bytes would change); nothing was run (use --file FOO=stash://c/BIN, which keeps every byte)\n',
    );
    const nul = await t.run(['set', 'c', 'NUL', '--raw'], { input: Buffer.from('a\0b') });
    assert.is(nul.code, 0, nul.stderr);
    const n = await t.run(['run', '--', 'true'], { env: { FOO: 'stash://c/NUL' } });
    assert.is(n.code, 65, n.stderr);
    assert.is(
      n.stderr,
      'stash: FOO=stash://c/NUL: the value holds a NUL byte, which an environment variable set by stash cannot carry; ' +
        'nothing was run (use --file FOO=stash://c/NUL, which keeps every byte)\n',
    );
    const ok = await t.run(['run', '--', 'sh', '-c', 'printf %s "$FOO"'], { env: { FOO: 'stash://c/TEXT' } });
    assert.is(ok.code, 0, ok.stderr);
    assert.is(ok.stdout, 'grüße ✓ text-s3cret');
  } finally {
    await t.dispose();
  }
});

test('env --format: a value that is not UTF-8 is refused in every format, a NUL byte in shell lines; nothing is printed', async () => {
  const t = await setup();
  try {
    for (const format of ['dotenv', 'json', 'shell']) {
      const r = await t.run(['env', 'c', '--format', format]);
      assert.is(r.code, 65, `${format}: ${r.stderr}`);
      assert.is(r.stdout, '', `${format}: nothing printed`);
      assert.is(
        r.stderr,
        `stash: the value of BIN in c is not UTF-8 text, which --format ${format} cannot carry exactly (its bytes would change); ` +
          'nothing was printed (stash get c BIN prints its bytes; or pass it as a file, which keeps every byte: ' +
          'stash run --file BIN=stash://c/BIN -- CMD)\n',
      );
    }
    // Without BIN: a NUL byte.
    assert.is((await t.run(['rm', 'c', 'BIN'])).code, 0);
    const nul = await t.run(['set', 'c', 'NUL', '--raw'], { input: Buffer.from('a\0b') });
    assert.is(nul.code, 0, nul.stderr);
    // A shell drops a NUL byte without a word (`. file` gives "ab"): refused.
    const shell = await t.run(['env', 'c', '--format', 'shell']);
    assert.is(shell.code, 65, shell.stderr);
    assert.is(shell.stdout, '');
    assert.is(
      shell.stderr,
      'stash: the value of NUL in c holds a NUL byte, which --format shell cannot carry; nothing was printed (use --format json)\n',
    );
    // JSON escapes it and dotenv keeps it: both read back exactly, and UTF-8 text is unchanged.
    const json = await t.run(['env', 'c', '--format', 'json']);
    assert.is(json.code, 0, json.stderr);
    assert.equal(JSON.parse(json.stdout), { NUL: 'a\0b', TEXT: 'grüße ✓ text-s3cret' });
    const dotenv = await t.run(['env', 'c', '--format', 'dotenv']);
    assert.is(dotenv.code, 0, dotenv.stderr);
    assert.equal(parseDotenv(dotenv.stdout), { NUL: 'a\0b', TEXT: 'grüße ✓ text-s3cret' });
  } finally {
    await t.dispose();
  }
});

test.run();
