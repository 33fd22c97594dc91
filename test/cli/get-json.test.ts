/**
 * `stash get C NAME --json` through the real binary: container, name, value
 * and change time; a value JSON cannot carry exactly is refused.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { cliEnv } from './harness.js';

test('get --json prints container, name, value and changedAt; a value that is not UTF-8 is refused', async () => {
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
    assert.equal(Object.keys(doc), ['container', 'name', 'value', 'changedAt']);
    assert.equal([doc.container, doc.name, doc.value], ['work', 'TOKEN', 'line "1"\nline 2']);
    assert.ok(Date.parse(doc.changedAt) >= started - 1000 && Date.parse(doc.changedAt) <= Date.now());
    assert.is((await t.run(['set', 'work', 'BIN', '--raw'], { input: Buffer.from([0xff, 0xfe, 0x00]) })).code, 0);
    const bin = await t.run(['get', 'work', 'BIN', '--json']);
    assert.is(bin.code, 65, bin.stderr);
    assert.match(bin.stderr, /the value of BIN is not UTF-8 text/);
    assert.is((await t.run(['get', 'work', 'TOKEN', '--json', '--clip'])).code, 64);
    assert.is((await t.run(['get', 'work', 'NOPE', '--json'])).code, 66);
  } finally {
    await t.dispose();
  }
});

test.run();
