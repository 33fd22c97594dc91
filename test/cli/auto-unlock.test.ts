/**
 * Auto-unlock against a real Secret Service (gnome-keyring on a private
 * session bus): enable stores the vault password after checking it, the
 * first command of a session then needs neither a terminal nor a password
 * source, disable stops using it, forget deletes it, passwd updates it, and a
 * stale stored password falls back to asking with a warning.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { createRequire } from 'node:module';
import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { needFacility } from '../helpers/facility.js';
import { cliEnv, type CliEnv } from './harness.js';
import { secretServiceFacility, startSecretService } from './secret-service.js';

interface Status {
  enabled: boolean;
  backend: string;
  available: boolean;
  secretStored: boolean | null;
  problem: string | null;
  vaultId: string;
}

async function status(t: CliEnv): Promise<Status> {
  const r = await t.run(['vault', 'sessions', 'auto-unlock', 'status', '--json']);
  assert.is(r.code, 0, r.stderr);
  return JSON.parse(r.stdout) as Status;
}

test('enable, use, disable, forget, passwd and a stale secret, against gnome-keyring', async () => {
  const facility = secretServiceFacility();
  if (!needFacility(facility.available, 'Secret Service', facility.reason)) return;
  const service = await startSecretService();
  const t = cliEnv({ DBUS_SESSION_BUS_ADDRESS: service.address });
  try {
    await t.initVault(['work']);
    await t.run(['set', 'work', 'K', '--password-file', t.pwFile], { input: 'value-k' });
    let s = await status(t);
    assert.equal(
      { enabled: s.enabled, available: s.available, secretStored: s.secretStored },
      { enabled: false, available: true, secretStored: false },
    );
    assert.match(s.backend, /^Secret Service/);
    const text = await t.run(['vault', 'sessions', 'auto-unlock', 'status']);
    assert.match(text.stdout, /^Auto-unlock: +disabled\nBackend: +Secret Service .*\nSecret stored: no\n$/);

    const wrong = join(t.home, 'wrong');
    writeFileSync(wrong, 'not it\n', { mode: 0o600 });
    const bad = await t.run(['vault', 'sessions', 'auto-unlock', 'enable', '--password-file', wrong]);
    assert.is(bad.code, 77, 'a wrong password is never stored');
    assert.is((await status(t)).secretStored, false);

    const on = await t.run(['vault', 'sessions', 'auto-unlock', 'enable', '--password-file', t.pwFile]);
    assert.is(on.code, 0, on.stderr);
    s = await status(t);
    assert.equal({ enabled: s.enabled, secretStored: s.secretStored }, { enabled: true, secretStored: true });

    // The first command of a new session: no terminal, no password source, no prompt.
    await t.run(['vault', 'sessions', 'lock-all']);
    rmSync(t.pwFile);
    const first = await t.run(['get', 'work', 'K']);
    assert.is(first.code, 0, first.stderr);
    assert.is(first.stdout, 'value-k');
    assert.is(first.stderr, '');

    // passwd keeps the stored password in step.
    const pw2 = join(t.home, 'pw2');
    writeFileSync(pw2, 'a brand new passphrase\n', { mode: 0o600 });
    writeFileSync(t.pwFile, `${t.password}\n`, { mode: 0o600 });
    const passwd = await t.run(['vault', 'passwd', '--password-file', t.pwFile, '--new-password-file', pw2]);
    assert.is(passwd.code, 0, passwd.stderr);
    assert.match(passwd.stdout, /Updated the password stored for auto-unlock\./);
    await t.run(['vault', 'sessions', 'lock-all']);
    assert.is((await t.run(['get', 'work', 'K'])).stdout, 'value-k', 'unlocked with the updated stored password');

    // disable: the secret stays, but is not used.
    assert.is((await t.run(['vault', 'sessions', 'auto-unlock', 'disable'])).code, 0);
    s = await status(t);
    assert.equal({ enabled: s.enabled, secretStored: s.secretStored }, { enabled: false, secretStored: true });
    await t.run(['vault', 'sessions', 'lock-all']);
    const disabled = await t.run(['get', 'work', 'K']);
    assert.is(disabled.code, 64, 'disabled: a password is needed again');

    // A stored secret that no longer opens the vault (changed by someone else): warn, then ask.
    assert.is((await t.run(['vault', 'sessions', 'auto-unlock', 'enable', '--password-file', pw2])).code, 0);
    process.env.DBUS_SESSION_BUS_ADDRESS = service.address;
    const { Entry } = createRequire(import.meta.url)('@napi-rs/keyring') as {
      Entry: new (s: string, u: string, o: object) => { setSecret(b: Uint8Array): void };
    };
    new Entry('stash', s.vaultId, { linux: { store: 'secret-service' } }).setSecret(Buffer.from('stale password'));
    await t.run(['vault', 'sessions', 'lock-all']);
    const stale = await t.run(['get', 'work', 'K']);
    assert.is(stale.code, 64);
    assert.match(
      stale.stderr,
      /^stash: warning: auto-unlock: the password in the keyring no longer opens this vault; run `stash vault sessions auto-unlock enable` again\nstash: a password is needed/,
    );

    // forget deletes it and disables.
    const forget = await t.run(['vault', 'sessions', 'auto-unlock', 'forget']);
    assert.is(forget.code, 0, forget.stderr);
    assert.match(forget.stdout, /^Deleted the stored password from the Secret Service/);
    s = await status(t);
    assert.equal({ enabled: s.enabled, secretStored: s.secretStored }, { enabled: false, secretStored: false });
    const again = await t.run(['vault', 'sessions', 'auto-unlock', 'forget']);
    assert.match(again.stdout, /^No password was stored/);
  } finally {
    await t.dispose();
    await service.stop();
  }
});

test('no Secret Service on the bus: status says so, enable fails with 69 and stores nothing', async () => {
  const t = cliEnv({ DBUS_SESSION_BUS_ADDRESS: 'unix:path=/nonexistent/stash-test-bus' });
  try {
    await t.initVault();
    const s = await status(t);
    assert.is(s.available, false);
    assert.is(s.secretStored, null);
    assert.match(s.problem!, /^cannot read from the Secret Service/);
    // A sentence, not the keyring library's D-Bus text.
    assert.match(
      s.problem!,
      /: the session bus \/nonexistent\/stash-test-bus does not exist \(check DBUS_SESSION_BUS_ADDRESS\)$/,
    );
    const text = await t.run(['vault', 'sessions', 'auto-unlock', 'status']);
    assert.match(text.stdout, /Backend: +Secret Service .* \(unavailable\)\nSecret stored: unknown: cannot read from/);
    const on = await t.run(['vault', 'sessions', 'auto-unlock', 'enable', '--password-file', t.pwFile]);
    assert.is(on.code, 69, on.stderr);
    assert.match(on.stderr, /^stash: cannot write to the Secret Service/);
    assert.not.match(on.stderr, /DBus error|Platform failure/);
    // No session bus at all (a console login, ssh): no X11 autolaunch text either.
    const none = await t.run(['vault', 'sessions', 'auto-unlock', 'status', '--json'], {
      env: { DBUS_SESSION_BUS_ADDRESS: '' },
    });
    const problem = String((JSON.parse(none.stdout) as { problem: string }).problem);
    assert.match(
      problem,
      /: there is no session bus \(DBUS_SESSION_BUS_ADDRESS is not set\); auto-unlock works inside a desktop login session$/,
    );
    assert.not.match(problem, /X11|autolaunch|DBus error/);
    assert.is((await status(t)).enabled, false);
  } finally {
    await t.dispose();
  }
});

test.run();
