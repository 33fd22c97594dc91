/**
 * `stash vault identity unpublish CODE | --all` end to end: real vaults
 * through `node bin/stash.js`, a real key server on loopback. The publisher
 * deletes a share before its TTL (signed with the vault's identity key), the
 * receiver then gets "expired or was unpublished"; --all deletes every share
 * the vault recorded at publish; another vault's key is refused; a code
 * already gone and the usage mistakes have their own exit statuses.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseShareCode } from '../../src/keyserver/share-code.js';
import type { TestServer } from '../keyserver/harness.js';
import { cliEnv, type CliEnv } from './harness.js';
import { as, ok } from './members.js';
import { confirmLink, startPlainServer } from './keyserver-harness.js';

let server: TestServer;
let alice: CliEnv;
let bob: CliEnv;

async function published(t: CliEnv, email: string): Promise<string> {
  const r = await ok(t, ['vault', 'identity', 'publish', '--email', email, '--server', server.url, '--json']);
  const code = (JSON.parse(r.stdout) as { code: string }).code;
  await confirmLink(server, email);
  return code;
}

const live = (code: string) => server.store.lookup(parseShareCode(code).canonical).state;
const recorded = (t: CliEnv): string[] => {
  try {
    return (
      JSON.parse(readFileSync(join(t.vault, 'published.json'), 'utf8')) as { shares: Array<{ code: string }> }
    ).shares.map((s) => s.code);
  } catch {
    return [];
  }
};

test.before(async () => {
  server = await startPlainServer();
  [alice, bob] = [cliEnv(), cliEnv()];
  for (const t of [alice, bob]) await t.initVault();
});

test.after(async () => {
  for (const t of [alice, bob]) await t?.dispose();
  await server?.stop();
});

test('unpublish CODE: signed with the vault identity; the receiver then hears it is gone; again: 66', async () => {
  const code = await published(alice, 'alice@example.test');
  assert.equal(recorded(alice), [code], 'publish recorded the share in the vault folder');
  // Typed as a receiver may type it: the command reads any spelling.
  const r = await ok(alice, ['vault', 'identity', 'unpublish', code.toLowerCase().replace(/-/g, ' ')]);
  assert.is(r.stdout, `Unpublished ${code} on ${server.url}: no server of its cluster hands it out any more.\n`);
  assert.is(live(code), 'expired');
  assert.equal(recorded(alice), []);

  const receive = await as(bob, [
    'vault',
    'contact',
    'receive',
    code,
    '--server',
    server.url,
    '--fingerprint',
    '0000-0000-0000-0000-0000-0000',
  ]);
  assert.is(receive.code, 66);
  assert.match(
    receive.stderr,
    /^stash: this share has expired or was unpublished; ask the publisher to publish again\n$/,
  );

  const again = await as(alice, ['vault', 'identity', 'unpublish', code, '--server', server.url]);
  assert.is(again.code, 66, again.stderr);
  assert.match(again.stdout, /already gone \(this share has expired or was unpublished/);
});

test("another vault's key is refused (77) and the share stays; --json; --all deletes every recorded share", async () => {
  const first = await published(alice, 'alice@example.test');
  const second = await published(alice, 'alice+2@example.test');
  const forged = await as(bob, ['vault', 'identity', 'unpublish', first, '--server', server.url]);
  assert.is(forged.code, 77, forged.stderr);
  assert.match(forged.stderr, /^stash: the unpublish request is not signed by the identity whose key this share holds/);
  assert.is(live(first), 'live');

  const all = await ok(alice, ['vault', 'identity', 'unpublish', '--all', '--json']);
  const out = JSON.parse(all.stdout) as {
    unpublished: Array<{ code: string; server: string; deletedAt: string }>;
    gone: unknown[];
    failed: unknown[];
  };
  assert.equal(out.unpublished.map((u) => u.code).sort(), [first, second].sort());
  assert.ok(out.unpublished.every((u) => u.server === server.url && !Number.isNaN(Date.parse(u.deletedAt))));
  assert.equal([out.gone, out.failed], [[], []]);
  assert.is(live(first), 'expired');
  assert.is(live(second), 'expired');
  assert.equal(recorded(alice), []);

  const none = await ok(alice, ['vault', 'identity', 'unpublish', '--all']);
  assert.match(none.stdout, /^Nothing to unpublish: .* recorded no share that has not expired\.\n$/);
});

test('usage: a code or --all, not neither or both (64, before any prompt); a typo is 64', async () => {
  for (const args of [[], ['--all', '01-7K3M-9QXD-W2HF-5']]) {
    const r = await as(alice, ['vault', 'identity', 'unpublish', ...args]);
    assert.is(r.code, 64, r.stderr);
    assert.match(r.stderr, /usage: stash vault identity unpublish CODE \| --all/);
  }
  const typo = await as(alice, ['vault', 'identity', 'unpublish', '01-7K3M-9QXD-W2HF-6', '--server', server.url]);
  assert.is(typo.code, 64);
  assert.match(typo.stderr, /typo/);
});

test.run();
