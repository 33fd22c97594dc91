/**
 * Files the user names for output, through the real CLI: `inject -o`,
 * `container export` (private and shared), `vault backup` (with --force) and
 * `vault identity statement --out` write only a regular file or a new one. A
 * FIFO, a socket, a folder, a symbolic link (to a file, or dangling) and, as
 * root, a character device made with mknod in the test's folder are refused
 * (73) with a message that says what the name is, and are left as they were,
 * with no temporary file beside them. A regular file is replaced, 0600.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { spawnSync } from 'node:child_process';
import {
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { createServer, type Server } from 'node:net';
import { join } from 'node:path';
import { wipe } from '../../src/vault/index.js';
import { haveCommand, isRoot, needFacility } from '../helpers/facility.js';
import { cliEnv, type CliEnv } from './harness.js';
import { sharedPair } from './members.js';

let t: CliEnv;
let bob: CliEnv;
let n = 0;

test.before(async () => {
  [t, bob] = [cliEnv(), cliEnv()];
  wipe(await sharedPair(t, bob, 'team'));
  t.env.STASH_PASSWORD_FILE = t.pwFile;
  for (const args of [
    ['container', 'create', 'work'],
    ['set', 'work', 'TOKEN', '--raw'],
  ]) {
    const r = await t.run(args, { input: 'tok-secret-1' });
    assert.is(r.code, 0, r.stderr);
  }
  writeFileSync(join(t.home, 'config.tpl'), 'token={{ stash://work/TOKEN }}\n');
});

test.after(async () => {
  await t.dispose();
  await bob.dispose();
});

/** The commands that write a file the user names, each with that name last but for options. */
const WRITERS: Array<[string, (file: string) => string[]]> = [
  ['inject -o', (file) => ['inject', '-i', join(t.home, 'config.tpl'), '-o', file]],
  ['container export (private)', (file) => ['container', 'export', 'work', file]],
  ['container export (shared)', (file) => ['container', 'export', 'team', file]],
  ['vault backup --force', (file) => ['vault', 'backup', file, '--force']],
  ['vault identity statement --out', (file) => ['vault', 'identity', 'statement', '--out', file]],
];

/** A new empty folder of the test's own. */
function folder(): string {
  const dir = join(t.home, `out-${n++}`);
  mkdirSync(dir);
  return dir;
}

/** Every writer refuses `path` (73, saying `kind`) and leaves the folder as `check` finds it. */
async function refusedByAll(path: string, kind: RegExp, check: () => void): Promise<void> {
  const before = readdirSync(join(path, '..')).sort();
  for (const [name, args] of WRITERS) {
    const r = await t.run(args(path));
    assert.is(r.code, 73, `${name} ${path}: ${r.stderr}`);
    assert.match(r.stderr, kind, name);
    assert.match(r.stderr, /stash writes only a regular file or a new one, so nothing was written/, name);
    assert.is(r.stdout, '', name);
    assert.equal(readdirSync(join(path, '..')).sort(), before, `${name}: nothing was added beside it`);
    check();
  }
}

test('a FIFO, a socket and a folder are refused by every command that writes a named file, and stay what they were', async () => {
  const dir = folder();
  const fifo = join(dir, 'fifo');
  assert.is(spawnSync('mkfifo', [fifo]).status, 0);
  await refusedByAll(fifo, /fifo is a FIFO \(named pipe\)/, () => assert.ok(lstatSync(fifo).isFIFO()));
  const sock = join(dir, 'sock');
  const server: Server = createServer();
  await new Promise<void>((resolve) => server.listen(sock, resolve));
  try {
    await refusedByAll(sock, /sock is a socket/, () => assert.ok(lstatSync(sock).isSocket()));
  } finally {
    server.close();
  }
  const sub = join(dir, 'sub');
  mkdirSync(sub);
  await refusedByAll(sub, /sub is a folder/, () => assert.equal(readdirSync(sub), []));
});

test('a symbolic link is refused, whether it points to a regular file or nowhere; the link and its target stay', async () => {
  const dir = folder();
  const target = join(dir, 'target');
  writeFileSync(target, 'original\n', { mode: 0o644 });
  const link = join(dir, 'link');
  symlinkSync(target, link);
  await refusedByAll(link, /link is a symbolic link \(to .*target\).*name the file it points to instead/, () => {
    assert.is(readlinkSync(link), target);
    assert.is(readFileSync(target, 'utf8'), 'original\n');
    assert.is(statSync(target).mode & 0o777, 0o644);
  });
  const dangling = join(dir, 'dangling');
  symlinkSync(join(dir, 'nowhere'), dangling);
  await refusedByAll(dangling, /dangling is a symbolic link \(to .*nowhere\)/, () => {
    assert.ok(lstatSync(dangling).isSymbolicLink());
    assert.equal(readdirSync(dir).sort(), ['dangling', 'link', 'target']);
  });
});

test('as root: a character device made with mknod is refused by every writer and is still the same device', async () => {
  if (!needFacility(isRoot && haveCommand('mknod'), 'a device node', 'mknod needs root')) return;
  const dev = join(folder(), 'null');
  const made = spawnSync('mknod', [dev, 'c', '1', '3']);
  assert.is(made.status, 0, made.stderr.toString());
  const rdev = lstatSync(dev).rdev;
  await refusedByAll(dev, /null is a character device/, () => {
    const st = lstatSync(dev);
    assert.ok(st.isCharacterDevice(), 'still a character device');
    assert.is(st.rdev, rdev, 'the same device');
  });
});

test('a regular file is replaced (0600), a new one created; an existing statement file is refused', async () => {
  const dir = folder();
  const file = join(dir, 'config');
  writeFileSync(file, 'old\n', { mode: 0o644 });
  const r = await t.run(['inject', '-i', join(t.home, 'config.tpl'), '-o', file]);
  assert.is(r.code, 0, r.stderr);
  assert.is(readFileSync(file, 'utf8'), 'token=tok-secret-1\n');
  assert.is(statSync(file).mode & 0o777, 0o600);
  const backup = join(dir, 'vault.backup');
  assert.is((await t.run(['vault', 'backup', backup])).code, 0);
  assert.is((await t.run(['vault', 'backup', backup])).code, 73, 'an existing file needs --force');
  assert.is((await t.run(['vault', 'backup', backup, '--force'])).code, 0);
  assert.equal(readdirSync(dir).sort(), ['config', 'vault.backup'], 'no temporary file left');
  const statement = await t.run(['vault', 'identity', 'statement', '--out', file]);
  assert.is(statement.code, 73, statement.stderr);
  assert.match(statement.stderr, /config exists already; choose another file/);
});

test.run();
