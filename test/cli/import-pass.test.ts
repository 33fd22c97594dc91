/**
 * `stash import pass` on a real password store: a throwaway GnuPG home with a
 * key made by gpg, entries written by pass itself (`pass init`, `pass
 * insert`), decrypted by the real gpg that stash runs: the flat names of
 * `--flat` (paths and fields: import-structure.test.ts). Also: a file gpg
 * cannot decrypt stops the import with nothing written, a missing gpg is
 * named, and no symbolic link below the store is followed (issue 40, item 3),
 * not even one swapped in after the walk.
 */
import { closeSync, mkdirSync, mkdtempSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { openStoreFile, storeEntries } from '../../src/cli/import/pass-store.js';
import { makeStore, passReady, sh } from '../helpers/pass-store.js';
import { cliEnv, snapshot } from './harness.js';

test('--flat: a password store imports as flat names: passwords, notes, an otpauth line as a seed; hidden folders skipped', async () => {
  if (!passReady()) return;
  const g = makeStore();
  const t = cliEnv({ GNUPGHOME: g.env.GNUPGHOME });
  try {
    sh(
      'pass',
      ['insert', '-m', 'web/site.example'],
      g.env,
      'hunter2-site\nlogin: alice\notpauth://totp/Site:alice?secret=JBSWY3DPEHPK3PXP&issuer=Site\n',
    );
    sh('pass', ['insert', '-m', 'email'], g.env, 'mail-pw\n');
    sh('pass', ['insert', '-m', 'Bank Account/2nd card'], g.env, 'pin-1234\nkept as notes\n  with indentation\n');
    // What pass's own tools keep beside the entries is not an entry.
    mkdirSync(join(g.store, '.extensions'));
    writeFileSync(join(g.store, '.extensions', 'junk.gpg'), 'not a pass entry');
    await t.initVault(['personal']);

    const r = await t.run(['import', 'pass', g.store, '--into', 'personal', '--flat', '--password-file', t.pwFile], {
      timeoutMs: 60_000,
    });
    assert.is(r.code, 0, r.stderr);
    for (const v of ['hunter2', 'mail-pw', 'pin-1234', 'alice', 'JBSWY3DP'])
      assert.not.ok((r.stdout + r.stderr).includes(v), `output holds ${v}`);
    assert.match(r.stdout, /\nBANK_ACCOUNT_2ND_CARD +new +Bank Account\/2nd card\.gpg password \(line 1\)\n/);
    assert.match(r.stderr, /Imported 6 entries into personal in one new version/);
    assert.not.match(r.stderr, /plain text/, 'a password store is encrypted: no reminder to delete it');
    const get = async (n: string): Promise<string> => {
      const g2 = await t.run(['get', 'personal', n]);
      assert.is(g2.code, 0, `${n}: ${g2.stderr}`);
      return g2.stdout;
    };
    assert.is(await get('WEB_SITE_EXAMPLE'), 'hunter2-site');
    assert.is(
      await get('WEB_SITE_EXAMPLE_NOTES'),
      'login: alice\notpauth://totp/Site:alice?secret=JBSWY3DPEHPK3PXP&issuer=Site',
    );
    assert.is(await get('EMAIL'), 'mail-pw');
    assert.is(await get('BANK_ACCOUNT_2ND_CARD'), 'pin-1234');
    assert.is(await get('BANK_ACCOUNT_2ND_CARD_NOTES'), 'kept as notes\n  with indentation');
    const otp = await t.run(['otp', 'personal', 'WEB_SITE_EXAMPLE_TOTP', '--json']);
    assert.is(otp.code, 0, otp.stderr);
    assert.match(JSON.parse(otp.stdout).code, /^[0-9]{6}$/);
    const names = JSON.parse((await t.run(['ls', 'personal', '--json'])).stdout) as Array<{ name: string }>;
    assert.equal(
      names.map((e) => e.name),
      [
        'BANK_ACCOUNT_2ND_CARD',
        'BANK_ACCOUNT_2ND_CARD_NOTES',
        'EMAIL',
        'WEB_SITE_EXAMPLE',
        'WEB_SITE_EXAMPLE_NOTES',
        'WEB_SITE_EXAMPLE_TOTP',
      ],
    );
  } finally {
    await t.dispose();
    g.cleanup();
  }
});

test('a file gpg cannot decrypt stops the import with nothing written; a missing gpg is named (69)', async () => {
  if (!passReady()) return;
  const g = makeStore();
  const t = cliEnv({ GNUPGHOME: g.env.GNUPGHOME });
  try {
    sh('pass', ['insert', '-m', 'a-good-one'], g.env, 'fine\n');
    writeFileSync(join(g.store, 'zz-broken.gpg'), 'this is not OpenPGP data');
    await t.initVault(['personal']);
    const before = snapshot(t.vault);
    const r = await t.run(['import', 'pass', g.store, '--into', 'personal', '--password-file', t.pwFile], {
      timeoutMs: 60_000,
    });
    assert.is(r.code, 65, r.stderr);
    assert.match(r.stderr, /^stash: gpg could not decrypt .*zz-broken\.gpg: .* \(nothing was imported\)\n$/);
    assert.equal(snapshot(t.vault), before, 'the container is as it was');
    const noGpg = await t.run(['import', 'pass', g.store, '--into', 'personal'], { env: { PATH: t.home } });
    assert.is(noGpg.code, 69, noGpg.stderr);
    assert.match(noGpg.stderr, /gpg is not on PATH: install GnuPG/);
    const notStore = await t.run(['import', 'pass', join(t.home, 'none'), '--into', 'personal']);
    assert.is(notStore.code, 66, notStore.stderr);
  } finally {
    await t.dispose();
    g.cleanup();
  }
});

test('symbolic links below the store are not followed: linked files and folders are skipped and named', async () => {
  if (!passReady()) return;
  const g = makeStore();
  const t = cliEnv({ GNUPGHOME: g.env.GNUPGHOME });
  try {
    sh('pass', ['insert', '-m', 'web/site'], g.env, 'site-pw\n');
    // A file of the user's own, outside the store, that the store's key could decrypt.
    sh('pass', ['insert', '-m', 'bank'], g.env, 'bank-secret-outside\n');
    const outside = join(g.home, 'outside');
    mkdirSync(outside);
    renameSync(join(g.store, 'bank.gpg'), join(outside, 'bank.gpg'));
    symlinkSync(join(outside, 'bank.gpg'), join(g.store, 'web', 'innocent.gpg'));
    symlinkSync(outside, join(g.store, 'linked'));
    // A link to a file inside the store is skipped too: nothing below the root is followed.
    symlinkSync(join(g.store, 'web', 'site.gpg'), join(g.store, 'alias.gpg'));
    // The store itself may be reached through a link (resolved once).
    const viaLink = join(g.home, 'store-link');
    symlinkSync(g.store, viaLink);
    await t.initVault(['personal']);

    const r = await t.run(['import', 'pass', viaLink, '--into', 'personal', '--flat', '--password-file', t.pwFile], {
      timeoutMs: 60_000,
    });
    assert.is(r.code, 0, r.stderr);
    assert.not.ok((r.stdout + r.stderr).includes('secret'), 'no value in the output');
    // Only the store's own regular file: not the outside one, not twice the inside one.
    const names = JSON.parse((await t.run(['ls', 'personal', '--json'])).stdout) as Array<{ name: string }>;
    assert.equal(
      names.map((e) => e.name),
      ['WEB_SITE'],
    );
    assert.is((await t.run(['get', 'personal', 'WEB_SITE'])).stdout, 'site-pw');
    assert.match(r.stderr, /^stash: warning: alias\.gpg is a symbolic link; skipped$/m);
    assert.match(
      r.stderr,
      /^stash: warning: linked is a symbolic link to a folder; skipped with everything under it$/m,
    );
    assert.match(r.stderr, /^stash: warning: web\/innocent\.gpg is a symbolic link; skipped$/m);
    assert.match(
      r.stderr,
      /Imported 1 entry into personal in one new version: 1 new, 0 replaced; .*3 files or folders skipped \(named above\)\./,
    );

    // A store of nothing but links names them instead of importing anything.
    rmSync(join(g.store, 'web', 'site.gpg'));
    const none = await t.run(['import', 'pass', g.store, '--into', 'personal', '--password-file', t.pwFile]);
    assert.is(none.code, 65, none.stderr);
    assert.match(none.stderr, /^stash: warning: alias\.gpg is a symbolic link; skipped$/m);
    assert.match(none.stderr, /holds no \.gpg files to import \(3 skipped, named above\); is it a password store\?\n$/);
  } finally {
    await t.dispose();
    g.cleanup();
  }
});

test('a file swapped for a link, or a folder for a linked one, after the walk is refused when it is opened', () => {
  const home = mkdtempSync(join(tmpdir(), 'sg-'));
  try {
    const store = join(home, 'store');
    const outside = join(home, 'outside');
    mkdirSync(join(store, 'web'), { recursive: true });
    mkdirSync(outside);
    writeFileSync(join(store, 'web', 'site.gpg'), 'inside');
    writeFileSync(join(store, 'web', 'other.gpg'), 'inside');
    writeFileSync(join(outside, 'site.gpg'), 'outside');
    writeFileSync(join(outside, 'other.gpg'), 'outside');
    const listing = storeEntries(store);
    assert.equal(
      listing.files.map((f) => f.rel),
      ['web/other', 'web/site'],
    );
    const [other, site] = listing.files as [(typeof listing.files)[0], (typeof listing.files)[0]];
    const refused = (f: typeof site, why: string): void => {
      try {
        openStoreFile(listing.root, f, `store/${f.rel}.gpg`);
      } catch (err) {
        assert.is((err as { code?: string }).code, 'IMPORT_INVALID', why);
        assert.match((err as Error).message, /changed while the store was read/, why);
        return;
      }
      assert.unreachable(why);
    };
    // Unchanged, it opens.
    closeSync(openStoreFile(listing.root, site, 'store/web/site.gpg'));
    // The file itself becomes a link (O_NOFOLLOW).
    rmSync(join(store, 'web', 'site.gpg'));
    symlinkSync(join(outside, 'site.gpg'), join(store, 'web', 'site.gpg'));
    refused(site, 'a file swapped for a link');
    // A folder above it becomes a link to a folder holding a file of the same name.
    renameSync(join(store, 'web'), join(home, 'web-moved'));
    symlinkSync(outside, join(store, 'web'));
    refused(other, 'a folder swapped for a link');
  } finally {
    rmSync(home, { recursive: true, force: true });
  }
});

test.run();
