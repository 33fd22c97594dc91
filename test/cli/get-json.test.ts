/**
 * `stash get C NAME --json` through the real binary: container, name, value
 * and change time; a value JSON cannot carry exactly is refused.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { cliEnv } from './harness.js';

test('get --json prints container, name, value, changedAt and fields; --field one field; a value that is not UTF-8 is refused', async () => {
  const t = cliEnv();
  try {
    await t.initVault(['work']);
    const started = Date.now();
    assert.is(
      (await t.run(['set', 'work', 'TOKEN', '--password-file', t.pwFile], { input: 'line "1"\nline 2' })).code,
      0,
    );
    const r = await t.run(['get', 'work', 'TOKEN', '--json']);
    assert.is(r.code, 0, r.stderr);
    const doc = JSON.parse(r.stdout);
    assert.equal(Object.keys(doc), ['container', 'name', 'value', 'changedAt', 'fields']);
    assert.equal([doc.container, doc.name, doc.value, doc.fields], ['work', 'TOKEN', 'line "1"\nline 2', {}]);
    assert.ok(Date.parse(doc.changedAt) >= started - 1000 && Date.parse(doc.changedAt) <= Date.now());
    assert.is((await t.run(['set', 'work', 'BIN', '--raw'], { input: Buffer.from([0xff, 0xfe, 0x00]) })).code, 0);
    const bin = await t.run(['get', 'work', 'BIN', '--json']);
    assert.is(bin.code, 65, bin.stderr);
    assert.match(bin.stderr, /the value of BIN is not UTF-8 text/);
    assert.is((await t.run(['get', 'work', 'TOKEN', '--json', '--clip'])).code, 64);
    const fields = ['--field', 'username=pat', '--field', 'url=https://example.org'];
    assert.is((await t.run(['set', 'work', 'web/example.org', ...fields], { input: 'pw' })).code, 0);
    const all = JSON.parse((await t.run(['get', 'work', 'web/example.org', '--json'])).stdout);
    assert.equal(
      [all.name, all.value, all.fields],
      ['web/example.org', 'pw', { url: 'https://example.org', username: 'pat' }],
    );
    const one = JSON.parse((await t.run(['get', 'work', 'web/example.org', '--json', '--field', 'url'])).stdout);
    assert.equal(Object.keys(one), ['container', 'name', 'field', 'value', 'changedAt']);
    assert.equal([one.field, one.value], ['url', 'https://example.org']);
    const none = await t.run(['get', 'work', 'web/example.org', '--field', 'notes']);
    assert.is(none.code, 66, none.stderr);
    assert.match(
      none.stderr,
      /entry web\/example\.org of container "work" has no field notes \(its fields: url, username\)/,
    );
    assert.is((await t.run(['get', 'work', 'NOPE', '--json'])).code, 66);
  } finally {
    await t.dispose();
  }
});

test.run();
