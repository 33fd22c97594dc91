/**
 * The recovery key through the real CLI: made at `vault init --recovery-key`
 * (shown once, in JSON too), `vault recover` sets a new password with it that
 * opens every container, a mistyped group is caught by the checksum, `passwd`
 * keeps it working, `recovery-key create` replaces it and `remove` ends it.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { formatRecoveryKey, parseRecoveryKey } from '../../src/vault/recovery-key.js';
import { randomBytes } from '../../src/vault/secure.js';
import { cliEnv } from './harness.js';

test('format: 14 groups of 4, read back whatever the case, spacing or O/I/L; any single mistyped character is caught', () => {
  const key = randomBytes(32);
  const text = formatRecoveryKey(key);
  assert.match(text, /^([0-9A-HJKMNP-TV-Z]{4}-){13}[0-9A-HJKMNP-TV-Z]{4}$/);
  assert.equal(parseRecoveryKey(text.toLowerCase().replace(/-/g, ' ')), key);
  assert.equal(parseRecoveryKey(text.replace(/0/g, 'O').replace(/1/g, 'I')), key);
  const alphabet = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';
  let caught = 0;
  const positions = text.replace(/-/g, '').length;
  for (let i = 0; i < positions; i++) {
    const chars = text.replace(/-/g, '').split('');
    chars[i] = alphabet[(alphabet.indexOf(chars[i]!) + 7) % 32]!;
    try {
      parseRecoveryKey(chars.join(''));
    } catch (err) {
      if (/checksum does not match/.test((err as Error).message)) caught++;
    }
  }
  assert.ok(
    caught >= positions - 1,
    `a changed character is caught (${caught} of ${positions}; the last group's padding bits may not count)`,
  );
  assert.throws(() => parseRecoveryKey('ABCD-EFGH'), /14 groups of 4/);
});

test('known answer: the format a user wrote down never changes (computed independently with Python base64.b32encode and hashlib.blake2b)', () => {
  const key = Buffer.from(Array.from({ length: 32 }, (_, i) => i));
  const text = '000G-40R4-0M30-E209-185G-R38E-1W81-24GK-2GAH-C5RR-34D1-P70X-3RFG-DNW4';
  assert.is(formatRecoveryKey(key), text);
  assert.equal(parseRecoveryKey(text), key);
  assert.equal(parseRecoveryKey(`  ${text.toLowerCase().replace(/-/g, '\u2013')} `), key, 'en dashes and spaces');
});

test('init --recovery-key, forget the password, recover: a new password opens every container; passwd, create and remove behave', async () => {
  const t = cliEnv();
  try {
    const init = await t.run(['vault', 'init', '--recovery-key', '--json', '--password-file', t.pwFile]);
    assert.is(init.code, 0, init.stderr);
    const { recoveryKey } = JSON.parse(init.stdout) as { recoveryKey: string };
    assert.match(recoveryKey, /^(\w{4}-){13}\w{4}$/);
    assert.not.ok(
      readFileSync(join(t.vault, 'vault.json'), 'utf8').includes(recoveryKey.replace(/-/g, '')),
      'the key itself is not stored',
    );
    assert.is((await t.run(['container', 'create', 'work'])).code, 0);
    assert.is((await t.run(['set', 'work', 'TOKEN'], { input: 'tok\n' })).code, 0);
    await t.run(['vault', 'sessions', 'stop']);

    const keyFile = join(t.home, 'recovery');
    const typo = recoveryKey.split('-');
    typo[3] = typo[3]!.split('').reverse().join('') === typo[3] ? 'ZZZZ' : typo[3]!.split('').reverse().join('');
    writeFileSync(keyFile, `${typo.join('-')}\n`, { mode: 0o600 });
    const newPw = join(t.home, 'new-password');
    writeFileSync(newPw, 'a brand new passphrase\n', { mode: 0o600 });
    const mistyped = await t.run(['vault', 'recover', '--recovery-key-file', keyFile, '--password-file', newPw]);
    assert.is(mistyped.code, 64, mistyped.stderr);
    assert.match(mistyped.stderr, /checksum does not match, so a group was mistyped/);

    writeFileSync(keyFile, `${recoveryKey}\n`, { mode: 0o600 });
    const recovered = await t.run(['vault', 'recover', '--recovery-key-file', keyFile, '--password-file', newPw]);
    assert.is(recovered.code, 0, recovered.stderr);
    assert.match(recovered.stdout, /^Set a new password for the vault at .*; every container opens with it\./);
    await t.run(['vault', 'sessions', 'stop']);
    assert.is(
      (await t.run(['get', 'work', 'TOKEN', '--password-file', t.pwFile])).code,
      77,
      'the forgotten password no longer opens it',
    );
    assert.is((await t.run(['get', 'work', 'TOKEN', '--password-file', newPw])).stdout, 'tok');
    // The key from stdin works too (and passwd keeps it working).
    const pw3 = join(t.home, 'pw3');
    writeFileSync(pw3, 'third passphrase here\n', { mode: 0o600 });
    assert.is((await t.run(['vault', 'passwd', '--password-file', newPw, '--new-password-file', pw3])).code, 0);
    const viaStdin = await t.run(['vault', 'recover', '--password-file', newPw], { input: `${recoveryKey}\n` });
    assert.is(viaStdin.code, 0, viaStdin.stderr);

    const created = await t.run(['vault', 'recovery-key', 'create', '--json', '--password-file', newPw]);
    assert.is(created.code, 0, created.stderr);
    const second = JSON.parse(created.stdout) as { recoveryKey: string; replaced: boolean };
    assert.is(second.replaced, true);
    const old = await t.run(['vault', 'recover', '--recovery-key-file', keyFile, '--password-file', newPw]);
    assert.is(old.code, 77, 'the replaced key no longer works');
    assert.match(old.stderr, /does not open the vault/);
    assert.match((await t.run(['vault', 'recovery-key', 'status'])).stdout, /has a recovery key, made /);
    assert.is((await t.run(['vault', 'recovery-key', 'remove', '--password-file', newPw])).code, 0);
    assert.equal(JSON.parse((await t.run(['vault', 'recovery-key', 'status', '--json'])).stdout), {
      recoveryKey: false,
      createdAt: null,
    });
    const none = await t.run(['vault', 'recover', '--password-file', newPw], { input: `${second.recoveryKey}\n` });
    assert.is(none.code, 66);
  } finally {
    await t.dispose();
  }
});

test('init without --recovery-key makes none and says how to make one', async () => {
  const t = cliEnv();
  try {
    const init = await t.run(['vault', 'init', '--password-file', t.pwFile]);
    assert.is(init.code, 0, init.stderr);
    assert.not.match(init.stdout, /Recovery key/);
    assert.match(
      init.stdout,
      /\nNo recovery key: a forgotten password loses this vault\. Make one to write down: stash vault recovery-key create\n/,
    );
    assert.match((await t.run(['vault', 'recovery-key', 'status'])).stdout, /has no recovery key/);
    const made = await t.run(['vault', 'init', '--recovery-key', '--no-recovery-key'], {
      env: { STASH_VAULT_DIR: join(t.home, 'v2') },
    });
    assert.is(made.code, 64);
  } finally {
    await t.dispose();
  }
});

test.run();
