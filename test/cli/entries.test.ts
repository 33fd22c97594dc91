/**
 * Entries through the real binary: `stash set` refuses an empty value (an
 * Enter at the hidden prompt, an empty pipe) unless --allow-empty, and takes a
 * value of exactly 64 KiB followed by the one newline it strips.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { needFacility } from '../helpers/facility.js';
import { havePty, sharedCliEnv, snapshot } from './harness.js';

// Every test here reads and writes entries of its own containers: one vault and agent for all of them.
const shared = sharedCliEnv();
test.after(() => shared.dispose());

const EMPTY_REFUSED =
  /^stash: the value of TOKEN is empty; nothing was stored \(add --allow-empty to store an empty value\)\n$/;

test('an empty value from stdin is refused (64) and the stored one kept; --allow-empty stores it', async () => {
  const t = await shared.fresh(['stdin']);
  const set = await t.run(['set', 'stdin', 'TOKEN', '--password-file', t.pwFile], { input: 'tok-1\n' });
  assert.is(set.code, 0, set.stderr);
  const before = snapshot(t.vault);
  for (const input of ['', '\n', '\r\n']) {
    const r = await t.run(['set', 'stdin', 'TOKEN', '--password-file', t.pwFile], { input });
    assert.is(r.code, 64, `${JSON.stringify(input)}: ${r.stderr}`);
    assert.match(r.stderr, EMPTY_REFUSED);
  }
  // Refused before any password is needed: no source at all gives the same answer.
  await t.run(['vault', 'sessions', 'lock-all']);
  const noSource = await t.run(['set', 'stdin', 'TOKEN'], { input: '' });
  assert.is(noSource.code, 64);
  assert.match(noSource.stderr, EMPTY_REFUSED);
  assert.equal(snapshot(t.vault), before, 'nothing in the vault changed');
  assert.is((await t.run(['get', 'stdin', 'TOKEN', '--password-file', t.pwFile])).stdout, 'tok-1');

  const allowed = await t.run(['set', 'stdin', 'TOKEN', '--allow-empty', '--password-file', t.pwFile], { input: '' });
  assert.is(allowed.code, 0, allowed.stderr);
  const get = await t.run(['get', 'stdin', 'TOKEN']);
  assert.is(get.code, 0, get.stderr);
  assert.is(get.stdout, '');
});

test('Enter at the hidden value prompt is refused (64) and the stored value kept', async () => {
  if (!needFacility(havePty(), 'pseudo-terminal', '/usr/bin/python3 with the pty module is missing')) return;
  const t = await shared.fresh(['hidden']);
  assert.is((await t.run(['set', 'hidden', 'TOKEN', '--password-file', t.pwFile], { input: 'tok-1' })).code, 0);
  const r = t.pty(
    ['set', 'hidden', 'TOKEN', '--password-file', t.pwFile],
    [
      ['Replace it\\? \\[y/N\\] ', 'y'],
      ['Value of TOKEN \\(hidden\\): ', ''],
    ],
  );
  assert.is(r.answered, 2, r.output);
  assert.is(r.status, 64, r.output);
  assert.match(r.output, /the value of TOKEN is empty; nothing was stored/);
  assert.is((await t.run(['get', 'hidden', 'TOKEN'])).stdout, 'tok-1');
  const allowed = t.pty(
    ['set', 'hidden', 'TOKEN', '--allow-empty', '--force'],
    [['Value of TOKEN \\(hidden\\): ', '']],
  );
  assert.is(allowed.status, 0, allowed.output);
  assert.is((await t.run(['get', 'hidden', 'TOKEN'])).stdout, '');
});

test('a 64 KiB value followed by its newline is stored whole; one byte more is refused', async () => {
  const t = await shared.fresh(['big']);
  const value = Buffer.alloc(64 * 1024, 'x');
  for (const ending of ['\n', '\r\n', '']) {
    const r = await t.run(['set', 'big', 'BIG', '--password-file', t.pwFile], {
      input: Buffer.concat([value, Buffer.from(ending)]),
    });
    assert.is(r.code, 0, `${JSON.stringify(ending)}: ${r.stderr}`);
    const get = await t.run(['get', 'big', 'BIG']);
    assert.is(get.stdout.length, value.length);
    assert.ok(Buffer.from(get.stdout).equals(value));
  }
  const over = await t.run(['set', 'big', 'BIG', '--password-file', t.pwFile], {
    input: Buffer.concat([value, Buffer.from('y\n')]),
  });
  assert.is(over.code, 65, over.stderr);
  assert.match(over.stderr, /^stash: the value of BIG on standard input is larger than 65536 bytes\n$/);
});

test('misspelt names: did you mean ...? for an entry (case too) while the container is open, and for a container with no password at all', async () => {
  const t = await shared.fresh(['work']);
  assert.is((await t.run(['set', 'work', 'GITHUB_TOKEN', '--password-file', t.pwFile], { input: 'tok\n' })).code, 0);
  for (const typo of ['GITHUB_TOKN', 'github_token']) {
    const r = await t.run(['get', 'work', typo]);
    assert.is(r.code, 66, r.stderr);
    assert.is(r.stderr, `stash: container "work" has no entry ${typo}; did you mean GITHUB_TOKEN?\n`);
    assert.is(r.stdout, '');
  }
  const far = await t.run(['get', 'work', 'SOMETHING_ELSE']);
  assert.is(far.stderr, 'stash: container "work" has no entry SOMETHING_ELSE\n', 'nothing close: no guess');
  await t.run(['vault', 'sessions', 'lock-all']);
  // No password source and nothing cached: container names come from the files alone.
  const wrok = await t.run(['get', 'wrok', 'GITHUB_TOKEN']);
  assert.is(wrok.code, 66, wrok.stderr);
  assert.match(wrok.stderr, /^stash: no container named "wrok" in the vault at .*; did you mean work\?\n$/);
});

test('--raw stores stdin byte for byte; without it one trailing newline is dropped (a PEM keeps its last newline only with --raw)', async () => {
  const t = await shared.fresh(['raw']);
  assert.is((await t.run(['set', 'raw', 'K', '--raw', '--password-file', t.pwFile], { input: 'a\nb\n' })).code, 0);
  const raw = await t.run(['get', 'raw', 'K']);
  assert.is(raw.stdout, 'a\nb\n', 'od -c shows a \\n b \\n');
  const plain = await t.run(['set', 'raw', 'K'], { input: 'a\nb\n' });
  assert.is(plain.code, 0, plain.stderr);
  assert.is((await t.run(['get', 'raw', 'K'])).stdout, 'a\nb');
  assert.is((await t.run(['set', 'raw', 'CRLF', '--raw'], { input: 'x\r\n' })).code, 0);
  assert.is((await t.run(['get', 'raw', 'CRLF'])).stdout, 'x\r\n');
});

test('set says Replaced when it replaced; at a terminal it asks first (no keeps the value, --force skips the question); the hidden value is asked twice', async () => {
  const t = await shared.fresh(['replace']);
  const first = await t.run(['set', 'replace', 'TOKEN', '--password-file', t.pwFile], { input: 'one\n' });
  assert.is(first.stderr, 'Stored TOKEN in replace.\n');
  const piped = await t.run(['set', 'replace', 'TOKEN'], { input: 'two\n' });
  assert.is(piped.code, 0, 'a piped value replaces without asking: a script has nobody to ask');
  assert.is(piped.stderr, 'Replaced TOKEN in replace.\n');
  if (!needFacility(havePty(), 'pseudo-terminal', '/usr/bin/python3 with the pty module is missing')) return;
  const no = t.pty(['set', 'replace', 'TOKEN'], [['TOKEN already exists in replace\\. Replace it\\? \\[y/N\\] ', 'n']]);
  assert.is(no.status, 1, no.output);
  assert.match(no.output, /kept the existing TOKEN; nothing was stored/);
  assert.is((await t.run(['get', 'replace', 'TOKEN'])).stdout, 'two');
  const yes = t.pty(
    ['set', 'replace', 'TOKEN'],
    [
      ['Replace it\\? \\[y/N\\] ', 'y'],
      ['Value of TOKEN \\(hidden\\): ', 'three'],
      ['Repeat the value of TOKEN: ', 'three'],
    ],
  );
  assert.is(yes.status, 0, yes.output);
  assert.match(yes.output, /Replaced TOKEN in replace\./);
  assert.is((await t.run(['get', 'replace', 'TOKEN'])).stdout, 'three');
  const forced = t.pty(
    ['set', 'replace', 'TOKEN', '--force'],
    [
      ['Value of TOKEN \\(hidden\\): ', 'four'],
      ['Repeat the value of TOKEN: ', 'fuor'],
      ['The two values differ; try again\\.[\\s\\S]*Value of TOKEN \\(hidden\\): ', 'four'],
      ['Repeat the value of TOKEN: ', 'four'],
    ],
  );
  assert.is(forced.status, 0, forced.output);
  assert.not.match(forced.output, /Replace it\?/);
  assert.is((await t.run(['get', 'replace', 'TOKEN'])).stdout, 'four');
});

test.run();
