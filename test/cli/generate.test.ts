/**
 * `stash generate` and `stash set --generate`: the character distribution is
 * uniform (a chi-square test on 100,000 characters, with a modulo-biased
 * control that the same test rejects), the options are checked, and a
 * generated value is stored without being printed unless --print asks.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { ALNUM_CHARSET, DEFAULT_CHARSET, parseCharset } from '../../src/cli/generate/charset.js';
import { DEFAULT_LENGTH, generatePassphrase, generatePassword, wordList } from '../../src/cli/generate/generator.js';
import { GENERATOR_OPTIONS } from '../../src/cli/generate/option-defs.js';
import { randomBytes, wipe } from '../../src/vault/secure.js';
import { cliEnv } from './harness.js';

/** Pearson's statistic of `counts` against a uniform expectation. */
function chiSquare(counts: number[], total: number): number {
  const expected = total / counts.length;
  return counts.reduce((sum, c) => sum + (c - expected) ** 2 / expected, 0);
}

/**
 * The chi-square value a uniform generator exceeds with probability about 1e-9 (Wilson-Hilferty;
 * z = 6.0): at 1e-4 a CI run of four Node lines failed once on a uniform draw (148.7 >= 147.5).
 * Modulo bias still lands far above it (about 1,600 against 194 for 90 characters).
 */
function critical(df: number): number {
  const z = 6.0;
  return df * (1 - 2 / (9 * df) + z * Math.sqrt(2 / (9 * df))) ** 3;
}

function histogram(set: string, text: Uint8Array): number[] {
  const counts = new Array<number>(set.length).fill(0);
  for (const byte of text) {
    const i = set.indexOf(String.fromCharCode(byte));
    assert.ok(i >= 0, `character ${byte} is not in the set`);
    counts[i]!++;
  }
  return counts;
}

test('100,000 generated characters pass a chi-square test; a modulo-biased generator fails the same test', () => {
  const total = 100_000;
  const value = generatePassword(DEFAULT_CHARSET, total);
  const stat = chiSquare(histogram(DEFAULT_CHARSET, value), total);
  wipe(value);
  const limit = critical(DEFAULT_CHARSET.length - 1);
  assert.ok(stat < limit, `chi-square ${stat.toFixed(1)} >= ${limit.toFixed(1)}: not uniform`);
  // The control: byte % 90 favours the first 76 characters (3 byte values each against 2).
  const bytes = randomBytes(total);
  const biased = Buffer.from(bytes.map((b) => DEFAULT_CHARSET.charCodeAt(b % DEFAULT_CHARSET.length)));
  const biasedStat = chiSquare(histogram(DEFAULT_CHARSET, biased), total);
  assert.ok(biasedStat > limit, `the test must catch modulo bias (${biasedStat.toFixed(1)} <= ${limit.toFixed(1)})`);
});

test('character sets: the documented default, --no-symbols, SPEC ranges, and SPEC errors', () => {
  assert.is(DEFAULT_CHARSET.length, 90);
  assert.is(ALNUM_CHARSET.length, 62);
  assert.not.match(DEFAULT_CHARSET, /[\s'"`\\]/, 'no space, quote, backtick or backslash');
  assert.is(parseCharset('a-f0-9'), '0123456789abcdef');
  assert.is(parseCharset('-ab'), '-ab', 'a leading - is literal');
  assert.is(parseCharset('ab-'), '-ab', 'a trailing - is literal');
  assert.throws(() => parseCharset(''), /must not be empty/);
  assert.throws(() => parseCharset('z-a'), /runs backwards/);
  assert.throws(() => parseCharset('aaa'), /fewer than 2 different/);
  assert.throws(() => parseCharset('ab c'), /only printable ASCII/);
  assert.throws(() => parseCharset('abé'), /only printable ASCII/);
  assert.is(
    GENERATOR_OPTIONS.length.help.includes(`default ${DEFAULT_LENGTH}`),
    true,
    'the help states the real default',
  );
});

test('passphrases: words of the shipped EFF list (7,776), joined by the separator', () => {
  const list = wordList();
  assert.is(list.length, 7776);
  assert.is(new Set(list).size, 7776);
  const p = generatePassphrase(6, '-');
  const words = p.toString('utf8').split('-');
  wipe(p);
  assert.is(words.length, 6);
  for (const w of words) assert.ok(list.includes(w), w);
});

test('stash generate: length, words, sets, JSON, and bad options refused (64)', async () => {
  const t = cliEnv();
  try {
    const r = await t.run(['generate', '--length', '32']);
    assert.is(r.code, 0, r.stderr);
    assert.is(r.stdout.length, 32, 'no newline when stdout is not a terminal');
    for (const c of r.stdout) assert.ok(DEFAULT_CHARSET.includes(c), c);
    assert.is((await t.run(['generate'])).stdout.length, 24, 'default: 24 characters');
    assert.match((await t.run(['generate', '--no-symbols', '--length', '40'])).stdout, /^[A-Za-z0-9]{40}$/);
    assert.match((await t.run(['generate', '--charset', 'a-f0-9', '--length', '64'])).stdout, /^[0-9a-f]{64}$/);
    assert.match((await t.run(['generate', '--words', '5', '--separator', ' '])).stdout, /^[a-z-]+( [a-z-]+){4}$/);
    const json = JSON.parse((await t.run(['generate', '--json'])).stdout) as { value: string; bits: number };
    assert.is(json.value.length, 24);
    assert.is(json.bits, 155.8);
    for (const [args, re] of [
      [['--length', '0'], /--length must be a whole number from 1 to 4096/],
      [['--length', 'x'], /--length must be a whole number/],
      [['--charset', 'z-a'], /runs backwards/],
      [['--words', '3', '--length', '5'], /does not combine/],
      [['--charset', 'a-z', '--no-symbols'], /do not combine/],
      [['--separator', '+'], /--separator goes with --words/],
    ] as Array<[string[], RegExp]>) {
      const bad = await t.run(['generate', ...args]);
      assert.is(bad.code, 64, `${args.join(' ')}: ${bad.stderr}`);
      assert.match(bad.stderr, re);
      assert.is(bad.stdout, '');
    }
  } finally {
    await t.dispose();
  }
});

test('set --generate stores a new value and prints nothing; --print prints it once; generator options need --generate', async () => {
  const t = cliEnv();
  try {
    await t.initVault(['work']);
    const set = await t.run(['set', 'work', 'DB_PASSWORD', '--generate', '--password-file', t.pwFile]);
    assert.is(set.code, 0, set.stderr);
    assert.is(set.stdout, '', 'nothing printed');
    assert.match(set.stderr, /^Stored DB_PASSWORD in work \(generated: 24 characters from 90 \(155\.8 bits\)\)\.\n$/);
    const got = await t.run(['get', 'work', 'DB_PASSWORD']);
    assert.is(got.stdout.length, 24);
    assert.ok(!set.stderr.includes(got.stdout), 'the value is not in the message');
    const printed = await t.run(['set', 'work', 'PHRASE', '--generate', '--words', '6', '--print']);
    assert.is(printed.code, 0, printed.stderr);
    assert.is(printed.stdout, (await t.run(['get', 'work', 'PHRASE'])).stdout, '--print shows exactly what was stored');
    assert.is(printed.stdout.split('-').length, 6);
    const stray = await t.run(['set', 'work', 'X', '--length', '10'], { input: 'v\n' });
    assert.is(stray.code, 64);
    assert.match(stray.stderr, /go with --generate/);
  } finally {
    await t.dispose();
  }
});

test.run();
