/**
 * Password input: a new password asked twice on a terminal (with retries),
 * Ctrl-C, empty and oversized inputs, group-readable password files, and
 * `vault passwd` from files and from a terminal.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { needFacility } from '../helpers/facility.js';
import { cliEnv, havePty } from './harness.js';

test('init on a terminal: asked twice, retried when the two differ, never echoed', async () => {
  if (!needFacility(havePty(), 'pseudo-terminal', '/usr/bin/python3 with the pty module is missing')) return;
  const t = cliEnv();
  try {
    const r = t.pty(
      ['vault', 'init'],
      [
        ['New vault password: ', 'first-try-1'],
        ['Repeat the new vault password: ', 'first-try-2'],
        ['New vault password: ', 'my long passphrase'],
        ['Repeat the new vault password: ', 'my long passphrase'],
      ],
    );
    assert.is(r.status, 0, r.output);
    assert.ok(r.output.includes('The two passwords differ; try again.'));
    assert.match(r.output, /Created a vault at /);
    for (const secret of ['first-try-1', 'first-try-2', 'my long passphrase'])
      assert.not.ok(r.output.includes(secret), 'no echo');
    const pw = join(t.home, 'pw');
    writeFileSync(pw, 'my long passphrase', { mode: 0o600 });
    await t.run(['vault', 'sessions', 'lock-all']); // init left the vault unlocked
    const ok = await t.run(['container', 'create', 'c', '--password-file', pw]);
    assert.is(ok.code, 0, `the confirmed password opens the vault: ${ok.stderr}`);
    const again = await t.run(['vault', 'init', '--password-file', pw]);
    assert.is(again.code, 73);
    assert.is(again.stderr, `stash: a vault already exists at ${t.vault}\n`);
  } finally {
    await t.dispose();
  }
});

test('init: Enter at the first prompt asks again; the new vault is left unlocked and the next step is shown', async () => {
  if (!needFacility(havePty(), 'pseudo-terminal', '/usr/bin/python3 with the pty module is missing')) return;
  const t = cliEnv();
  try {
    const r = t.pty(
      ['vault', 'init'],
      [
        ['New vault password: ', ''],
        ['New vault password: ', 'my long passphrase'],
        ['Repeat the new vault password: ', 'my long passphrase'],
      ],
    );
    assert.is(r.status, 0, r.output);
    assert.is(r.answered, 3);
    assert.match(r.output, /The password cannot be empty; try again\.\r?\n/);
    assert.not.ok(r.output.includes('The two passwords differ'), r.output);
    assert.match(r.output, /Next: create a container with `stash container create NAME`\./);
    // No password source and no terminal: only the cached vault key can make this work.
    const create = await t.run(['container', 'create', 'work']);
    assert.is(create.code, 0, create.stderr);
    // The unlock prompt, too, asks again after an empty answer.
    await t.run(['vault', 'sessions', 'lock-all']);
    const open = t.pty(
      ['open', 'work'],
      [
        ['Password for the vault at .*: ', ''],
        ['Password for the vault at .*: ', 'my long passphrase'],
      ],
    );
    assert.is(open.status, 0, open.output);
    assert.match(open.output, /The password cannot be empty; try again\./);
  } finally {
    await t.dispose();
  }
});

test('input typed before the prompt appears is discarded, not taken as the password', async () => {
  if (!needFacility(havePty(), 'pseudo-terminal', '/usr/bin/python3 with the pty module is missing')) return;
  const t = cliEnv();
  try {
    // The first step matches at once: its line reaches the terminal while stash is still starting (echo on).
    const r = t.pty(
      ['vault', 'init'],
      [
        ['', 'typed-too-early'],
        ['New vault password: ', 'the real one'],
        ['Repeat the new vault password: ', 'the real one'],
      ],
    );
    assert.is(r.status, 0, r.output);
    assert.match(r.output, /what was typed before this prompt was shown on the screen and has been discarded/);
    assert.not.ok(r.output.includes('The two passwords differ'), r.output);
    await t.run(['vault', 'sessions', 'lock-all']); // init left the vault unlocked
    const early = join(t.home, 'early');
    writeFileSync(early, 'typed-too-early', { mode: 0o600 });
    assert.is(
      (await t.run(['container', 'create', 'x', '--password-file', early])).code,
      77,
      'the early line is not the password',
    );
    const real = join(t.home, 'real');
    writeFileSync(real, 'the real one', { mode: 0o600 });
    const ok = await t.run(['container', 'create', 'x', '--password-file', real]);
    assert.is(ok.code, 0, ok.stderr);
  } finally {
    await t.dispose();
  }
});

test('three mismatches give up (64); Ctrl-C cancels (130); nothing is created', async () => {
  if (!needFacility(havePty(), 'pseudo-terminal', '/usr/bin/python3 with the pty module is missing')) return;
  const t = cliEnv();
  try {
    const ask: Array<[string, string]> = [];
    for (let i = 0; i < 3; i++)
      ask.push(['New vault password: ', `long enough a${i}`], ['Repeat the new vault password: ', `long enough b${i}`]);
    const r = t.pty(['vault', 'init'], ask);
    assert.is(r.status, 64, r.output);
    assert.match(r.output, /stash: the two passwords differed three times; nothing was changed/);
    const cancel = t.pty(['vault', 'init'], [['New vault password: ', '\x03']]);
    assert.is(cancel.status, 130, cancel.output);
    assert.match(cancel.output, /stash: cancelled/);
    const list = await t.run(['container', 'list']);
    assert.is(list.code, 66, 'no vault was created');
  } finally {
    await t.dispose();
  }
});

test('a new password under 8 characters is refused before anything is written; a short one is warned about before the repeat prompt', async () => {
  const t = cliEnv();
  try {
    const short = join(t.home, 'short');
    writeFileSync(short, 'abc\n', { mode: 0o600 });
    const refused = await t.run(['vault', 'init', '--password-file', short]);
    assert.is(refused.code, 64, refused.stderr);
    assert.match(
      refused.stderr,
      /\nstash: the new password has 3 characters; at least 8 are needed \(a passphrase of several words is best\)\. Nothing was written\n$/,
    );
    assert.not.ok(existsSync(t.vault), 'no vault folder was created');
    // Multi-byte characters count once each: 8 of them pass the minimum.
    const accents = join(t.home, 'accents');
    writeFileSync(accents, 'éééééééé\n', { mode: 0o600 });
    const warned = await t.run(['vault', 'init', '--password-file', accents]);
    assert.is(warned.code, 0, warned.stderr);
    assert.match(
      warned.stderr,
      /\nstash: warning: this password has only 8 characters; 12 or more .* is much harder to guess\n/,
    );
    rmSync(t.vault, { recursive: true, force: true });
    const allowed = await t.run(['vault', 'init', '--password-file', short, '--allow-weak-password']);
    assert.is(allowed.code, 0, allowed.stderr);
    assert.match(allowed.stderr, /only 3 characters/);
    const pw2 = join(t.home, 'pw2');
    writeFileSync(pw2, 'tiny\n', { mode: 0o600 });
    const passwd = await t.run(['vault', 'passwd', '--password-file', short, '--new-password-file', pw2]);
    assert.is(passwd.code, 64, 'passwd applies the same rule');
    await t.run(['vault', 'sessions', 'lock-all']);
    assert.is(
      (await t.run(['container', 'create', 'c', '--password-file', short])).code,
      0,
      'the old password still opens the vault',
    );
    if (!needFacility(havePty(), 'pseudo-terminal', '/usr/bin/python3 with the pty module is missing')) return;
    rmSync(t.vault, { recursive: true, force: true });
    const r = t.pty(
      ['vault', 'init'],
      [
        ['New vault password: ', 'abc'],
        ['try again[\\s\\S]*New vault password: ', 'ten chars!'],
        ['only 10 characters[\\s\\S]*Repeat the new vault password: ', 'ten chars!'],
      ],
    );
    assert.is(r.status, 0, r.output);
    assert.match(
      r.output,
      /the new password has 3 characters; at least 8 are needed \(a passphrase of several words is best\); try again\./,
    );
    assert.match(
      r.output,
      /warning: this password has only 10 characters[\s\S]*Repeat the new vault password: [\s\S]*Created a vault/,
    );
  } finally {
    await t.dispose();
  }
});

test('empty, oversized and group-readable password files', async () => {
  const t = cliEnv();
  try {
    const empty = join(t.home, 'empty');
    writeFileSync(empty, '\n', { mode: 0o600 });
    const e = await t.run(['vault', 'init', '--password-file', empty]);
    assert.is(e.code, 64);
    assert.match(e.stderr, /the password from .*empty is empty/);
    const big = join(t.home, 'big');
    writeFileSync(big, 'x'.repeat(5000), { mode: 0o600 });
    const b = await t.run(['vault', 'init', '--password-file', big]);
    assert.is(b.code, 65);
    assert.match(b.stderr, /is larger than 4096 bytes/);
    const open = join(t.home, 'open');
    writeFileSync(open, 'group readable password\n', { mode: 0o644 });
    const o = await t.run(['vault', 'init', '--password-file', open]);
    assert.is(o.code, 0, o.stderr);
    assert.match(
      o.stderr,
      new RegExp(
        `stash: warning: password file \\(--password-file\\) ${open} is readable by other users \\(mode 0644\\); chmod 600 it`,
      ),
    );
    const noTty = await t.run(['vault', 'passwd']);
    assert.is(noTty.code, 64);
    assert.match(noTty.stderr, /no terminal to ask on/);
  } finally {
    await t.dispose();
  }
});

test('passwd from files: the old password stops working, the new one works, cached keys stay valid', async () => {
  const t = cliEnv();
  try {
    await t.initVault(['work']);
    await t.run(['set', 'work', 'K', '--password-file', t.pwFile], { input: 'kept' });
    const before = readFileSync(join(t.vault, 'containers', 'work.stash'));
    const newPw = join(t.home, 'new');
    writeFileSync(newPw, 'the new passphrase\n', { mode: 0o600 });
    const needsNew = await t.run(['vault', 'passwd', '--password-file', t.pwFile]);
    assert.is(needsNew.code, 64);
    assert.match(needsNew.stderr, /give the new one with --new-password-file FILE/);
    const r = await t.run(['vault', 'passwd', '--password-file', t.pwFile, '--new-password-file', newPw]);
    assert.is(r.code, 0, r.stderr);
    assert.is((await t.run(['get', 'work', 'K'])).stdout, 'kept', 'the cached vault key is still the vault key');
    await t.run(['vault', 'sessions', 'lock-all']);
    const old = await t.run(['get', 'work', 'K', '--password-file', t.pwFile]);
    assert.is(old.code, 77);
    const fresh = await t.run(['get', 'work', 'K', '--password-file', newPw]);
    assert.is(fresh.stdout, 'kept');
    assert.ok(readFileSync(join(t.vault, 'containers', 'work.stash')).equals(before), 'containers are not rewritten');
  } finally {
    await t.dispose();
  }
});

test('passwd on a terminal: current password even when the key is cached, then the new one twice', async () => {
  if (!needFacility(havePty(), 'pseudo-terminal', '/usr/bin/python3 with the pty module is missing')) return;
  const t = cliEnv();
  try {
    await t.initVault(['work']); // leaves the vault key cached
    const r = t.pty(
      ['vault', 'passwd'],
      [
        ['Password for the vault at .*: ', t.password],
        ['New vault password: ', 'next passphrase'],
        ['Repeat the new vault password: ', 'next passphrase'],
      ],
    );
    assert.is(r.status, 0, r.output);
    assert.is(r.answered, 3, 'the current password was asked despite the cached key');
    await t.run(['vault', 'sessions', 'lock-all']);
    const ok = await t.run(['container', 'create', 'x', '--password-stdin'], { input: 'next passphrase' });
    assert.is(ok.code, 0, ok.stderr);
  } finally {
    await t.dispose();
  }
});

test('container create, list, rm (confirmation, --force, cached key dropped)', async () => {
  const t = cliEnv();
  try {
    await t.initVault(['alpha', 'beta']);
    const list = await t.run(['container', 'list', '--json']);
    const rows = JSON.parse(list.stdout) as Array<{ name: string; id: string; problem: string | null }>;
    assert.equal(
      rows.map((r) => r.name),
      ['alpha', 'beta'],
    );
    assert.ok(rows.every((r) => /^[0-9a-f]{32}$/.test(r.id) && r.problem === null));
    const dup = await t.run(['container', 'create', 'alpha']);
    assert.is(dup.code, 73);
    assert.match(dup.stderr, /^stash: a container named "alpha" already exists/);
    await t.run(['open', 'alpha']);
    const noForce = await t.run(['container', 'rm', 'alpha']);
    assert.is(noForce.code, 64);
    assert.match(noForce.stderr, /without confirmation: there is no terminal to ask on; add --force/);
    const rm = await t.run(['container', 'rm', 'alpha', '--force']);
    assert.is(rm.code, 0, rm.stderr);
    const sessions = JSON.parse((await t.run(['vault', 'sessions', '--json'])).stdout) as {
      sessions: Array<{ name: string | null; path: string }>;
    };
    assert.not.ok(
      sessions.sessions.some((s) => s.path.endsWith('alpha.stash')),
      'the removed container key was forgotten',
    );
    const gone = await t.run(['container', 'rm', 'alpha', '--force']);
    assert.is(gone.code, 66);
    if (havePty()) {
      const no = t.pty(['container', 'rm', 'beta'], [['Type its name to confirm: ', 'nope']]);
      assert.is(no.status, 1);
      assert.match(no.output, /Nothing deleted\./);
      const yes = t.pty(['container', 'rm', 'beta'], [['Type its name to confirm: ', 'beta']]);
      assert.is(yes.status, 0, yes.output);
    }
    const text = await t.run(['container', 'list']);
    assert.match(text.stdout, /^No containers yet/);
  } finally {
    await t.dispose();
  }
});

test.run();
