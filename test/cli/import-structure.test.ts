/**
 * Importers keep structure (issue 41, item 5), through the real binary: a
 * password store made by gpg and pass, with folders, `user:`/`url:` lines and
 * an otpauth line, imports into entry paths with fields, which `get`,
 * `get --field`, `read stash://C/PATH#FIELD` and `otp` (checked against
 * oathtool) read back; `--dry-run` shows the mapping and no value; Bitwarden
 * and 1Password exports give folders/titles as paths and logins as value and
 * fields; `--overwrite` replaces an entry whole.
 */
import { spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { haveCommand, needFacility } from '../helpers/facility.js';
import { makeStore, passReady } from '../helpers/pass-store.js';
import { cliEnv, snapshot, type CliEnv } from './harness.js';
import { copyFixture, holdsNone, importFixture, tableOf } from './import-files.js';

const SECRET = 'JBSWY3DPEHPK3PXP';

/** `stash ARGS` that must succeed; its stdout. */
async function ok(t: CliEnv, args: string[]): Promise<string> {
  const r = await t.run(args);
  assert.is(r.code, 0, `${args.join(' ')}: ${r.stderr}`);
  return r.stdout;
}

function oathtool(): string {
  const r = spawnSync('oathtool', ['--totp', '-b', SECRET], { encoding: 'utf8' });
  assert.is(r.status, 0, r.stderr);
  return r.stdout.trim();
}

test('a pass store imports into paths and fields: get, get --field, read #FIELD and otp (= oathtool) read them', async () => {
  if (!passReady() || !needFacility(haveCommand('oathtool'), 'oathtool', 'apt install oathtool')) return;
  const g = makeStore();
  const t = cliEnv({ GNUPGHOME: g.env.GNUPGHOME });
  try {
    g.insert('web/github.com', 'gh-line-one\nuser: octocat\nurl: https://github.com/login\n\nrecovery codes below\n');
    g.insert('otp/github', `otp-line-one\notpauth://totp/GitHub:octocat?secret=${SECRET}&issuer=GitHub\n`);
    g.insert('Bank Account/2nd card', 'pin-1234\nSecurity Question: first-pet-rex\n  indented, kept\n');
    g.insert('email', 'mail-pw\nlogin: me@example.com\nUsername: me-again\n');
    await t.initVault(['C']);
    const before = snapshot(t.vault);
    const values = ['gh-line-one', 'octocat', 'otp-line-one', SECRET, 'pin-1234', 'first-pet', 'mail-pw', 'me@'];

    const dry = await t.run(['import', 'pass', g.store, '--into', 'C', '--dry-run', '--password-file', t.pwFile], {
      timeoutMs: 60_000,
    });
    assert.is(dry.code, 0, dry.stderr);
    holdsNone(dry.stdout + dry.stderr, values);
    assert.equal(tableOf(dry.stdout), [
      ['PATH', 'ACTION', 'FIELDS', 'FROM'],
      [
        'Bank-Account/2nd-card',
        'new',
        'security-question ("Security Question"), notes',
        'Bank Account/2nd card.gpg (named "Bank Account/2nd card")',
      ],
      ['email', 'new', 'username ("login"), username-2 ("Username")', 'email.gpg'],
      ['otp/github', 'new', 'totp', 'otp/github.gpg'],
      ['web/github.com', 'new', 'username ("user"), url, notes', 'web/github.com.gpg'],
      [''],
    ]);
    assert.match(
      dry.stderr,
      /Dry run: nothing was written\. 4 new, 0 to replace; 8 fields besides the values; 1 path mapped \(see FROM\)\./,
    );
    assert.equal(snapshot(t.vault), before, 'the dry run wrote nothing');

    const r = await t.run(['import', 'pass', g.store, '--into', 'C'], { timeoutMs: 60_000 });
    assert.is(r.code, 0, r.stderr);
    holdsNone(r.stdout + r.stderr, values);
    assert.match(r.stderr, /Imported 4 entries into C in one new version: 4 new, 0 replaced; 8 fields besides/);

    // Line 1 is the value; user: gives username; stash://C/PATH#FIELD reads the same field.
    assert.is(await ok(t, ['get', 'C', 'web/github.com']), 'gh-line-one');
    assert.is(await ok(t, ['get', 'C', 'web/github.com', '--field', 'username']), 'octocat');
    assert.is(await ok(t, ['read', 'stash://C/web/github.com#username']), 'octocat');
    assert.is(await ok(t, ['get', 'C', 'web/github.com', '--field', 'url']), 'https://github.com/login');
    assert.is(await ok(t, ['get', 'C', 'web/github.com', '--field', 'notes']), 'recovery codes below');
    const bank = JSON.parse(await ok(t, ['get', 'C', 'Bank-Account/2nd-card', '--json']));
    assert.equal(
      [bank.value, bank.fields],
      ['pin-1234', { notes: '  indented, kept', 'security-question': 'first-pet-rex' }],
    );
    const email = JSON.parse(await ok(t, ['get', 'C', 'email', '--json']));
    assert.equal(email.fields, { username: 'me@example.com', 'username-2': 'me-again' });
    assert.is(await ok(t, ['get', 'C', 'otp/github']), 'otp-line-one');

    // The otpauth line is the totp field: stash otp gives oathtool's code (taken before and after,
    // so a 30 s step boundary between them cannot fail the test).
    const early = oathtool();
    const code = await ok(t, ['otp', 'C', 'otp/github']);
    const late = oathtool();
    assert.ok(code === early || code === late, `stash otp gave ${code}; oathtool ${early} then ${late}`);
  } finally {
    await t.dispose();
    g.cleanup();
  }
});

test('Bitwarden and 1Password: folders and titles become paths, logins a value and fields that otp and read use', async () => {
  const t = cliEnv();
  try {
    await t.initVault(['bw', 'op']);
    const bw = await importFixture(t, 'bitwarden', 'bitwarden.json', 'bw');
    assert.is(bw.code, 0, bw.stderr);
    holdsNone(bw.stdout + bw.stderr, ['hunter2', 'octocat', 'JBSWY3DP', 'recovery', 'correct horse', '4111']);
    assert.equal(tableOf(bw.stdout), [
      ['PATH', 'ACTION', 'FIELDS', 'FROM'],
      [
        'Work/GitHub',
        'new',
        'username, totp, url, url-2 ("url"), notes, api-key ("API key"), field-2fa-enabled ("2FA enabled")',
        'item "GitHub"',
      ],
      ['GitHub', 'new', 'username, totp', 'item "GitHub"'],
      ['Wi-Fi-home', 'new', '-', 'item "Wi-Fi (home)" (named "Wi-Fi (home)")'],
      ['Visa', 'new', '-', 'item "Visa"'],
      [''],
    ]);
    const gh = JSON.parse(await ok(t, ['get', 'bw', 'Work/GitHub', '--json']));
    assert.is(gh.value, 'hunter2-gh');
    assert.equal(Object.keys(gh.fields), ['api-key', 'field-2fa-enabled', 'notes', 'totp', 'url', 'url-2', 'username']);
    assert.equal(
      [gh.fields.username, gh.fields.url, gh.fields['url-2'], gh.fields['api-key'], gh.fields['field-2fa-enabled']],
      ['octocat', 'https://github.com/login', 'https://github.com', 'ghp_example', 'true'],
    );
    assert.is(await ok(t, ['read', 'stash://bw/GitHub#username']), 'work-octocat');
    assert.match(JSON.parse(await ok(t, ['otp', 'bw', 'Work/GitHub', '--json'])).code, /^[0-9]{6}$/);
    // A secure note (and a card, with a warning) has no password: its notes are its value.
    assert.is(await ok(t, ['get', 'bw', 'Wi-Fi-home']), 'SSID: home\nkey: correct horse');
    assert.is(await ok(t, ['get', 'bw', 'Visa']), 'call the bank first');
    assert.match(bw.stderr, /warning: .*only the notes and custom fields were imported of "Visa" \(card\)/);

    const op = await t.run(['import', '1password', copyFixture(t, '1password.csv'), '--into', 'op']);
    assert.is(op.code, 0, op.stderr);
    holdsNone(op.stdout + op.stderr, ['p,a', 'r0uter', 'secret-1p', 'JBSWY3DP', 'line two']);
    assert.match(
      op.stdout,
      /\nExample-Mail +new +url, username, totp, notes +line 2 "Example Mail" \(named "Example Mail"\)\n/,
    );
    const mail = JSON.parse(await ok(t, ['get', 'op', 'Example-Mail', '--json']));
    assert.equal(
      [mail.value, mail.fields.username, mail.fields.notes],
      ['p,a"ss', 'alice@example.com', 'line one\r\nline two, with a comma'],
    );
    const code = JSON.parse(await ok(t, ['otp', 'op', 'Example-Mail', '--json']));
    assert.equal([code.digits, code.period, code.algorithm], [8, 60, 'SHA256']);
    assert.is(await ok(t, ['get', 'op', '1Password-Account', '--field', 'url']), 'https://my.1password.com');
  } finally {
    await t.dispose();
  }
});

test('an entry is judged whole: refused while it exists, kept by --skip-existing, replaced with its fields by --overwrite', async () => {
  const t = cliEnv();
  try {
    await t.initVault(['bw']);
    const file = copyFixture(t, 'bitwarden.json');
    assert.is((await t.run(['import', 'bitwarden', file, '--into', 'bw', '--password-file', t.pwFile])).code, 0);
    const changed = JSON.parse(readFileSync(file, 'utf8'));
    changed.items[0].login.password = 'new-gh-password';
    changed.items[0].fields = [];
    changed.items = [changed.items[0], { type: 2, name: 'Fresh note', notes: 'fresh' }];
    writeFileSync(file, JSON.stringify(changed), { mode: 0o600 });

    const before = snapshot(t.vault);
    const refused = await t.run(['import', 'bitwarden', file, '--into', 'bw']);
    assert.is(refused.code, 73, refused.stderr);
    assert.match(refused.stderr, /^stash: bw already holds Work\/GitHub; nothing was imported \(add --overwrite/m);
    assert.equal(snapshot(t.vault), before);

    const skip = await t.run(['import', 'bitwarden', file, '--into', 'bw', '--skip-existing']);
    assert.is(skip.code, 0, skip.stderr);
    assert.match(skip.stdout, /\nWork\/GitHub +skip +/);
    assert.is(await ok(t, ['get', 'bw', 'Work/GitHub']), 'hunter2-gh');
    assert.is(await ok(t, ['get', 'bw', 'Fresh-note']), 'fresh');

    const over = await t.run(['import', 'bitwarden', file, '--into', 'bw', '--overwrite']);
    assert.is(over.code, 0, over.stderr);
    assert.match(over.stdout, /\nWork\/GitHub +replace +username, totp, url, url-2 \("url"\), notes +item "GitHub"\n/);
    const gh = JSON.parse(await ok(t, ['get', 'bw', 'Work/GitHub', '--json']));
    assert.is(gh.value, 'new-gh-password');
    assert.equal(
      Object.keys(gh.fields),
      ['notes', 'totp', 'url', 'url-2', 'username'],
      'the dropped custom fields are gone',
    );
  } finally {
    await t.dispose();
  }
});

test.run();
