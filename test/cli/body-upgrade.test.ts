/**
 * A container written before entry paths and fields (body version 1, by the
 * release at fa5b440: test/fixtures/body-v1-vault) is read unchanged by this
 * release, values, change times and history, and is written as body version 2
 * on its next write, which then holds paths and fields beside the old entries.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { copyFixtureVault } from '../helpers/fixture-vault.js';
import { cliEnv } from './harness.js';

const fixture = join(process.cwd(), 'test', 'fixtures', 'body-v1-vault');

interface HistoryDoc {
  current: { size: number; changedAt: string | null } | null;
  versions: Array<{ version: number; size: number; changedAt: string | null }>;
}

test('a version-1 container is read as it was, then upgraded by a write that adds a path and a field', async () => {
  const t = cliEnv({ STASH_PASSWORD_FILE: join(fixture, 'password') });
  try {
    const vault = t.env.STASH_VAULT_DIR!;
    copyFixtureVault(fixture, vault);
    const file = join(vault, 'containers', 'team.stash');
    const before = readFileSync(file);
    const run = async (args: string[], input?: string) => {
      const r = await t.run(args, input === undefined ? {} : { input });
      assert.is(r.code, 0, `${args.join(' ')}: ${r.stderr}`);
      return r.stdout;
    };
    const history = async (path: string) => JSON.parse(await run(['history', 'team', path, '--json'])) as HistoryDoc;

    assert.is(await run(['get', 'team', 'API_TOKEN']), 'second-token');
    assert.is(await run(['get', 'team', 'DB_URL']), 'postgres://db');
    const token = await history('API_TOKEN');
    assert.is(token.versions.length, 1, 'the history block of version 1 reads');
    assert.is(await run(['get', 'team', 'API_TOKEN', '--version', '1']), 'first-token');
    assert.is((await history('OLD_KEY')).current, null, 'a removed entry keeps its history');
    assert.is(await run(['get', 'team', 'OLD_KEY', '--version', '1']), 'gone');
    assert.ok(readFileSync(file).equals(before), 'reading does not rewrite it');

    await run(['set', 'team', 'web/github.com'], 'gh-pass');
    await run(['set', 'team', 'web/github.com', '--field', 'username=pat']);
    assert.not.ok(readFileSync(file).equals(before), 'the write rewrote the file');
    // A version-1 body has no room for a path or a field (u8 names, env-shaped): the write made version 2,
    // and everything version 1 held came across.
    assert.is(await run(['get', 'team', 'web/github.com']), 'gh-pass');
    assert.is(await run(['get', 'team', 'web/github.com', '--field', 'username']), 'pat');
    assert.is(await run(['get', 'team', 'API_TOKEN']), 'second-token');
    assert.is(await run(['get', 'team', 'API_TOKEN', '--version', '1']), 'first-token');
    assert.is(await run(['get', 'team', 'OLD_KEY', '--version', '1']), 'gone');
    assert.equal(await history('API_TOKEN'), token, 'change times and history kept');
  } finally {
    await t.dispose();
  }
});

test.run();
