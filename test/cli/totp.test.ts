/**
 * TOTP: RFC 6238's test vectors for SHA-1, SHA-256 and SHA-512 (Appendix B),
 * otpauth URIs and base32 secrets parsed and refused, and the whole path
 * through the CLI: set --totp (argument and stdin), ls marks the entry, otp
 * prints the code the library computes for the same moment.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { decodeBase32, formatTotp, isTotpValue, parseTotp } from '../../src/cli/totp/otpauth.js';
import { secondsLeft, totpAt } from '../../src/cli/totp/totp.js';
import { cliEnv } from './harness.js';

const SEEDS = {
  SHA1: Buffer.from('12345678901234567890'),
  SHA256: Buffer.from('12345678901234567890123456789012'),
  SHA512: Buffer.from('1234567890123456789012345678901234567890123456789012345678901234'),
} as const;

// RFC 6238 Appendix B: time, then the 8-digit codes for SHA1, SHA256, SHA512.
const VECTORS: Array<[number, string, string, string]> = [
  [59, '94287082', '46119246', '90693936'],
  [1111111109, '07081804', '68084774', '25091201'],
  [1111111111, '14050471', '67062674', '99943326'],
  [1234567890, '89005924', '91819424', '93441116'],
  [2000000000, '69279037', '90698825', '38618901'],
  [20000000000, '65353130', '77737706', '47863826'],
];

test('RFC 6238 test vectors, all three hashes', () => {
  for (const [time, sha1, sha256, sha512] of VECTORS) {
    for (const [algorithm, want] of [
      ['SHA1', sha1],
      ['SHA256', sha256],
      ['SHA512', sha512],
    ] as const) {
      assert.is(
        totpAt({ secret: SEEDS[algorithm], algorithm, digits: 8, period: 30 }, time),
        want,
        `${algorithm} at ${time}`,
      );
    }
  }
  // 6 digits are the low 6 of the same number.
  assert.is(totpAt({ secret: SEEDS.SHA1, algorithm: 'SHA1', digits: 6, period: 30 }, 59), '287082');
  assert.is(secondsLeft(30, 59), 1);
  assert.is(secondsLeft(30, 60), 30);
});

test('otpauth URIs and base32 secrets: parsed, normalised, and refused with the reason', () => {
  const b32 = 'GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ'; // "12345678901234567890"
  assert.equal(decodeBase32('gezd gnbv-gy3t qojq gezd gnbv gy3t qojq===='), SEEDS.SHA1);
  const p = parseTotp(
    `otpauth://totp/ACME%20Co:alice@example.org?secret=${b32}&issuer=ACME%20Co&algorithm=SHA256&digits=8&period=60`,
  );
  assert.equal(
    [p.algorithm, p.digits, p.period, p.label, p.issuer],
    ['SHA256', 8, 60, 'ACME Co:alice@example.org', 'ACME Co'],
  );
  assert.equal(p.secret, SEEDS.SHA1);
  const stored = formatTotp(p);
  assert.ok(isTotpValue(Buffer.from(stored)));
  assert.equal(parseTotp(stored), p, 'the stored form parses back to the same seed');
  const bare = parseTotp(b32);
  assert.equal([bare.algorithm, bare.digits, bare.period], ['SHA1', 6, 30]);
  for (const [text, re] of [
    [`otpauth://hotp/x?secret=${b32}&counter=1`, /only otpauth:\/\/totp\//],
    ['otpauth://totp/x', /no secret=/],
    [`otpauth://totp/x?secret=${b32}&algorithm=MD5`, /SHA1, SHA256 or SHA512/],
    [`otpauth://totp/x?secret=${b32}&digits=9`, /digits must be a whole number from 6 to 8/],
    ['GEZDGNBV', /at least 10/],
    ['not base32!', /not base32/],
  ] as Array<[string, RegExp]>) {
    assert.throws(() => parseTotp(text), re, text);
  }
});

test('set --totp stores a seed, ls marks it, otp prints the current code; a plain secret is refused by otp', async () => {
  const t = cliEnv();
  try {
    await t.initVault(['work']);
    const uri = 'otpauth://totp/GitHub:alice?secret=GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ&issuer=GitHub';
    const set = await t.run(['set', 'work', 'GITHUB_TOTP', '--totp', uri, '--password-file', t.pwFile]);
    assert.is(set.code, 0, set.stderr);
    assert.match(set.stderr, /visible to other local users/, 'a secret on the command line is warned about');
    const piped = await t.run(['set', 'work', 'AWS_TOTP', '--totp', '-'], {
      input: 'GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ\n',
    });
    assert.is(piped.code, 0, piped.stderr);
    assert.not.match(piped.stderr, /visible/);
    await t.run(['set', 'work', 'PLAIN'], { input: 'x\n' });
    const ls = await t.run(['ls', 'work']);
    assert.match(ls.stdout, /^NAME +BYTES +CHANGED +KIND\n/);
    assert.match(ls.stdout, /\nGITHUB_TOTP +\d+ +.* UTC +totp\n/);
    assert.match(ls.stdout, /\nPLAIN +1 +.* UTC +-\n/);
    const json = JSON.parse((await t.run(['ls', 'work', '--json'])).stdout) as Array<{ name: string; totp: boolean }>;
    assert.equal(
      json.map((e) => [e.name, e.totp]),
      [
        ['AWS_TOTP', true],
        ['GITHUB_TOTP', true],
        ['PLAIN', false],
      ].sort(),
    );
    for (const name of ['GITHUB_TOTP', 'AWS_TOTP']) {
      const before = totpAt({ secret: SEEDS.SHA1, algorithm: 'SHA1', digits: 6, period: 30 }, Date.now() / 1000);
      const otp = await t.run(['otp', 'work', name]);
      const after = totpAt({ secret: SEEDS.SHA1, algorithm: 'SHA1', digits: 6, period: 30 }, Date.now() / 1000);
      assert.is(otp.code, 0, otp.stderr);
      assert.ok(
        otp.stdout === before || otp.stdout === after,
        `${name}: ${otp.stdout} is the code of now (${before}/${after})`,
      );
    }
    const j = JSON.parse((await t.run(['otp', 'work', 'GITHUB_TOTP', '--json'])).stdout) as {
      code: string;
      expiresInSeconds: number;
      period: number;
    };
    assert.match(j.code, /^\d{6}$/);
    assert.ok(j.expiresInSeconds >= 1 && j.expiresInSeconds <= 30);
    const plain = await t.run(['otp', 'work', 'PLAIN']);
    assert.is(plain.code, 65);
    assert.match(plain.stderr, /work\/PLAIN is not a TOTP seed/);
    const badSeed = await t.run(['set', 'work', 'BAD', '--totp', 'otpauth://totp/x?secret=ABC']);
    assert.is(badSeed.code, 65);
    assert.match(badSeed.stderr, /at least 10/);
  } finally {
    await t.dispose();
  }
});

test.run();
