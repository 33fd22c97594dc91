/**
 * writeUserFile (src/vault/user-file.ts), the one writer of files the user
 * names: a name swapped for a symbolic link or a FIFO while the new bytes
 * are written is found by the look before the rename, and nothing replaces
 * it; a new-only write follows no link; checkOutputPath names what a name is.
 */
import { spawnSync } from 'node:child_process';
import {
  lstatSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  symlinkSync,
  unlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { checkOutputPath, writeUserFile } from '../../src/vault/user-file.js';
import { expectCode } from './vault-fixture.js';

let dir = '';
test.before.each(() => {
  dir = mkdtempSync(join(tmpdir(), 'stash-user-file-'));
});
test.after.each(() => rmSync(dir, { recursive: true, force: true }));

/** Chunks whose reading (while the temporary file is written) first runs `swap`: a race, made certain. */
function chunksThatSwap(bytes: Buffer, swap: () => void): Buffer[] {
  const chunks = [bytes];
  chunks[Symbol.iterator] = function* () {
    swap();
    yield bytes;
    return undefined;
  } as () => ArrayIterator<Buffer>;
  return chunks;
}

test('a name swapped for a link or a FIFO during the write is not replaced; another regular file is', () => {
  const path = join(dir, 'out');
  const elsewhere = join(dir, 'elsewhere');
  writeFileSync(elsewhere, 'keep\n');
  writeFileSync(path, 'old\n');
  const toLink = () => {
    unlinkSync(path);
    symlinkSync(elsewhere, path);
  };
  expectCode(() => writeUserFile(path, chunksThatSwap(Buffer.from('secret'), toLink)), 'OUTPUT_NOT_FILE');
  assert.ok(lstatSync(path).isSymbolicLink(), 'the link is still there');
  assert.is(readFileSync(elsewhere, 'utf8'), 'keep\n');
  unlinkSync(path);
  const toFifo = () => assert.is(spawnSync('mkfifo', [path]).status, 0);
  expectCode(() => writeUserFile(path, chunksThatSwap(Buffer.from('secret'), toFifo)), 'OUTPUT_NOT_FILE');
  assert.ok(lstatSync(path).isFIFO());
  unlinkSync(path);
  writeFileSync(path, 'old\n');
  const toOtherFile = () => {
    unlinkSync(path);
    writeFileSync(join(dir, 'other'), 'theirs\n');
    renameSync(join(dir, 'other'), path);
  };
  writeUserFile(path, chunksThatSwap(Buffer.from('secret'), toOtherFile));
  assert.is(readFileSync(path, 'utf8'), 'secret', 'another regular file is replaced, as the first would have been');
  assert.equal(readdirSync(dir).sort(), ['elsewhere', 'out'], 'no temporary file left');
});

test('new-only writes refuse any name there, a dangling link too; checkOutputPath names the kind', () => {
  const path = join(dir, 'statement');
  symlinkSync(join(dir, 'nowhere'), path);
  expectCode(() => writeUserFile(path, [Buffer.from('x')], { replace: false }), 'OUTPUT_NOT_FILE');
  assert.equal(readdirSync(dir), ['statement'], 'the link was not followed');
  unlinkSync(path);
  writeUserFile(path, [Buffer.from('public\n')], { replace: false, mode: 0o644 });
  assert.is(lstatSync(path).mode & 0o777, 0o644 & ~process.umask());
  expectCode(() => writeUserFile(path, [Buffer.from('x')], { replace: false }), 'FILE_EXISTS');
  assert.is(readFileSync(path, 'utf8'), 'public\n');
  expectCode(() => writeUserFile(join(dir, 'no', 'such'), [Buffer.from('x')], { replace: false }), 'FILE_NOT_FOUND');
  assert.is(checkOutputPath(join(dir, 'new')), null);
  assert.ok(checkOutputPath(path)?.isFile());
  assert.throws(() => checkOutputPath(dir), /is a folder: stash writes only a regular file or a new one/);
});

test.run();
