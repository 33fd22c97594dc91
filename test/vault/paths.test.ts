import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { defaultVaultDir, vaultExists, vaultPaths } from '../../src/vault/index.js';

test('STASH_VAULT_DIR wins everywhere', () => {
  for (const platform of ['linux', 'darwin', 'win32', 'freebsd'] as const) {
    assert.is(defaultVaultDir({ STASH_VAULT_DIR: '/srv/v', HOME: '/home/u', APPDATA: 'C:\\A' }, platform), '/srv/v');
  }
});

test('Linux and other Unix: XDG_DATA_HOME (absolute only), else ~/.local/share', () => {
  assert.is(defaultVaultDir({ HOME: '/home/u', XDG_DATA_HOME: '/data' }, 'linux'), '/data/stash');
  assert.is(defaultVaultDir({ HOME: '/home/u' }, 'linux'), '/home/u/.local/share/stash');
  assert.is(defaultVaultDir({ HOME: '/home/u', XDG_DATA_HOME: 'relative/dir' }, 'linux'), '/home/u/.local/share/stash');
  assert.is(defaultVaultDir({ HOME: '/home/u', XDG_DATA_HOME: '' }, 'freebsd'), '/home/u/.local/share/stash');
  assert.is(defaultVaultDir({ HOME: '/home/u', STASH_VAULT_DIR: '' }, 'linux'), '/home/u/.local/share/stash');
});

test('macOS: ~/Library/Application Support/stash/vault', () => {
  assert.is(
    defaultVaultDir({ HOME: '/Users/u', XDG_DATA_HOME: '/ignored' }, 'darwin'),
    '/Users/u/Library/Application Support/stash/vault',
  );
});

test('Windows: %APPDATA%\\stash\\vault, else under the profile', () => {
  assert.is(
    defaultVaultDir({ APPDATA: 'C:\\Users\\u\\AppData\\Roaming' }, 'win32'),
    'C:\\Users\\u\\AppData\\Roaming\\stash\\vault',
  );
  assert.is(defaultVaultDir({ USERPROFILE: 'C:\\Users\\u' }, 'win32'), 'C:\\Users\\u\\AppData\\Roaming\\stash\\vault');
});

test('vault paths and existence', () => {
  const p = vaultPaths('/v');
  assert.equal(
    [p.meta, p.identity, p.contacts, p.containers, p.container('prod')],
    ['/v/vault.json', '/v/identity.json', '/v/contacts.stash', '/v/containers', '/v/containers/prod.stash'],
  );
  assert.not.ok(vaultExists('/nonexistent/stash/vault'));
});

test('importing the vault module does not load sodium', async () => {
  const { spawnSync } = await import('node:child_process');
  const { tsxNode } = await import('../helpers/facility.js');
  const code = `
    import('${new URL('../../src/vault/index.ts', import.meta.url).href}').then((v) => {
      v.defaultVaultDir();
      const loaded = Object.keys(require.cache).some((k) => k.includes('sodium-native'));
      process.stdout.write(loaded ? 'loaded' : 'not loaded');
    });`;
  const r = spawnSync(tsxNode[0]!, [...tsxNode.slice(1), '--input-type=commonjs', '-e', code], { encoding: 'utf8' });
  assert.is(r.stdout, 'not loaded', r.stderr);
});

test.run();
