import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { mkdtempSync, mkdirSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { configPath, loadConfig } from '../../src/config/app-config.js';

const home = mkdtempSync(join(tmpdir(), 'stash-config-'));
const base: NodeJS.ProcessEnv = { HOME: home, XDG_CONFIG_HOME: join(home, 'cfg') };

function write(text: string): string {
  const p = join(home, `c-${Math.random().toString(36).slice(2)}.toml`);
  writeFileSync(p, text);
  return p;
}

async function error(env: NodeJS.ProcessEnv): Promise<string> {
  try {
    await loadConfig(env);
  } catch (err) {
    assert.is((err as { code?: string }).code, 'CONFIG');
    return (err as Error).message;
  }
  throw new Error('expected a config error');
}

test('path order: STASH_AGENT_CONFIG, STASH_CONFIG, platform default', () => {
  assert.equal(configPath({ ...base, STASH_AGENT_CONFIG: '/a', STASH_CONFIG: '/b' }), {
    path: '/a',
    source: 'STASH_AGENT_CONFIG',
  });
  assert.equal(configPath({ ...base, STASH_CONFIG: '/b' }), { path: '/b', source: 'STASH_CONFIG' });
  assert.equal(configPath(base, 'linux'), { path: join(home, 'cfg', 'stash', 'config.toml'), source: 'default' });
  assert.equal(configPath({ HOME: home }, 'linux').path, join(home, '.config', 'stash', 'config.toml'));
  assert.equal(
    configPath({ HOME: home }, 'darwin').path,
    join(home, 'Library', 'Application Support', 'stash', 'config.toml'),
  );
  assert.equal(
    configPath({ HOME: home, APPDATA: 'C:\\Users\\a\\AppData\\Roaming' }, 'win32').path,
    join('C:\\Users\\a\\AppData\\Roaming', 'stash', 'config.toml'),
  );
});

test('defaults without a file: both true, source default', async () => {
  const c = await loadConfig(base);
  assert.is(c.fileFound, false);
  assert.equal(c.preventSleep, { value: true, source: 'default', from: null });
  assert.equal(c.terminateOnSuspend, { value: true, source: 'default', from: null });
});

test('file values, the alias, and environment overrides with their sources', async () => {
  mkdirSync(join(home, 'cfg', 'stash'), { recursive: true });
  writeFileSync(
    join(home, 'cfg', 'stash', 'config.toml'),
    '# comment\n[agent]\nsuspend_inhibit = false\nterminate_on_suspend = false\n',
  );
  let c = await loadConfig(base);
  assert.equal(c.preventSleep, { value: false, source: 'file', from: 'agent.suspend_inhibit' });
  assert.equal(c.terminateOnSuspend, { value: false, source: 'file', from: 'agent.terminate_on_suspend' });
  c = await loadConfig({ ...base, STASH_AGENT_PREVENT_SLEEP: 'yes', STASH_AGENT_TERMINATE_ON_SUSPEND: '1' });
  assert.equal(c.preventSleep, { value: true, source: 'environment', from: 'STASH_AGENT_PREVENT_SLEEP' });
  assert.equal(c.terminateOnSuspend.value, true);
  rmSync(join(home, 'cfg'), { recursive: true });
});

test('agent.lock_on_screen_lock: true by default, false from the file, the environment wins, a bad value names its line', async () => {
  assert.equal((await loadConfig(base)).lockOnScreenLock, { value: true, source: 'default', from: null });
  const p = write('[agent]\nlock_on_screen_lock = false\n');
  assert.equal((await loadConfig({ ...base, STASH_CONFIG: p })).lockOnScreenLock, {
    value: false,
    source: 'file',
    from: 'agent.lock_on_screen_lock',
  });
  assert.equal(
    (await loadConfig({ ...base, STASH_CONFIG: p, STASH_AGENT_LOCK_ON_SCREEN_LOCK: 'on' })).lockOnScreenLock,
    { value: true, source: 'environment', from: 'STASH_AGENT_LOCK_ON_SCREEN_LOCK' },
  );
  assert.match(
    await error({ ...base, STASH_CONFIG: write('[agent]\nlock_on_screen_lock = 1\n') }),
    /:2: agent\.lock_on_screen_lock must be a boolean/,
  );
  assert.match(
    await error({ ...base, STASH_AGENT_LOCK_ON_SCREEN_LOCK: 'maybe' }),
    /^STASH_AGENT_LOCK_ON_SCREEN_LOCK must be true or false/,
  );
});

test('errors name the file, the key and what was expected', async () => {
  let p = write('[agent]\nprevent_sleep = "yes"\n');
  let m = await error({ ...base, STASH_CONFIG: p });
  assert.ok(m.includes(p) && m.includes('agent.prevent_sleep') && m.includes('boolean'), m);
  p = write('[agent]\nprevent_slep = true\n');
  m = await error({ ...base, STASH_CONFIG: p });
  assert.ok(m.includes(p) && m.includes('agent.prevent_slep') && m.includes('known keys'), m);
  p = write('[agent\n');
  m = await error({ ...base, STASH_CONFIG: p });
  assert.ok(m.includes(p) && m.includes('not valid TOML'), m);
  p = write('key_server_url = 5\n');
  m = await error({ ...base, STASH_CONFIG: p });
  assert.ok(m.includes('key_server_url'), m);
  p = write('[agent]\nprevent_sleep = true\nsuspend_inhibit = false\n');
  m = await error({ ...base, STASH_CONFIG: p });
  assert.match(m, /disagree/);
  m = await error({ ...base, STASH_CONFIG: join(home, 'missing.toml') });
  assert.match(m, /cannot read config file .*missing\.toml.*STASH_CONFIG/);
  m = await error({ ...base, STASH_AGENT_PREVENT_SLEEP: 'maybe' });
  assert.match(m, /STASH_AGENT_PREVENT_SLEEP must be true or false.*"maybe"/);
});

test('key_server_url from file, overridden by STASH_KEY_SERVER_URL', async () => {
  const p = write('key_server_url = "https://keys.example.org"\n');
  let c = await loadConfig({ ...base, STASH_CONFIG: p });
  assert.equal(c.keyServerUrl, { value: 'https://keys.example.org', source: 'file', from: 'key_server_url' });
  c = await loadConfig({ ...base, STASH_CONFIG: p, STASH_KEY_SERVER_URL: 'http://127.0.0.1:8089' });
  assert.is(c.keyServerUrl.value, 'http://127.0.0.1:8089');
});

test('cli.clip_seconds: default 45, from the file, STASH_CLIP_SECONDS over it; bad values name the line or the variable', async () => {
  assert.equal((await loadConfig(base)).clipSeconds, { value: 45, source: 'default', from: null });
  let p = write('[cli]\nclip_seconds = 10\n');
  assert.equal((await loadConfig({ ...base, STASH_CONFIG: p })).clipSeconds, {
    value: 10,
    source: 'file',
    from: 'cli.clip_seconds',
  });
  assert.equal((await loadConfig({ ...base, STASH_CONFIG: p, STASH_CLIP_SECONDS: ' 20 ' })).clipSeconds, {
    value: 20,
    source: 'environment',
    from: 'STASH_CLIP_SECONDS',
  });
  for (const bad of ['0', '2.5', '86401', '"45"', '-1']) {
    p = write(`# the delay\n[cli]\nclip_seconds = ${bad}\n`);
    const m = await error({ ...base, STASH_CONFIG: p });
    assert.ok(m.startsWith(`${p}:3: cli.clip_seconds must be a whole number of seconds from 1 to 86400`), m);
  }
  p = write('[cli]\nclip_second = 5\n');
  assert.match(
    await error({ ...base, STASH_CONFIG: p }),
    /:2: unknown key "cli\.clip_second"; known keys: cli\.clip_seconds/,
  );
  p = write('[cli]\nclip_seconds = soon\n');
  assert.match(
    await error({ ...base, STASH_CONFIG: p }),
    /clip_seconds takes a whole number of seconds from 1 to 86400, unquoted/,
  );
  assert.match(
    await error({ ...base, STASH_CLIP_SECONDS: 'soon' }),
    /^STASH_CLIP_SECONDS must be a whole number of seconds from 1 to 86400, got "soon"/,
  );
});

test.after(() => rmSync(home, { recursive: true, force: true }));
test.run();
