/**
 * Where the files of plaintext go (src/cli/memory-folder.ts): XDG_RUNTIME_DIR
 * when it is a tmpfs of the user's own, else /dev/shm, else nothing. The
 * chooser with folders the test makes (a folder on disk is checked to be one,
 * as `stat -f -c %T` would say), then `stash run --file` for real: with
 * XDG_RUNTIME_DIR on a disk folder the program is handed a file on tmpfs and
 * nothing is written in that folder; without XDG_RUNTIME_DIR /dev/shm is used;
 * and, in a mount namespace whose /dev/shm is a disk folder, refused (69)
 * before the program runs and before any password, unless --insecure-tmp.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { spawnSync } from 'node:child_process';
import { chownSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { inMemory, memoryParent, SHM_DIR } from '../../src/cli/memory-folder.js';
import { isRoot, needFacility } from '../helpers/facility.js';
import { cliEnv, diskFolder, shmReplacedBy, type CliEnv } from './harness.js';

const linux = process.platform === 'linux';
const shmUsable = linux && inMemory(SHM_DIR) === true;
const uid = typeof process.getuid === 'function' ? process.getuid() : -1;
let t: CliEnv;
/** A folder on disk: in the checkout, which is never a tmpfs here (checked in before()). */
let disk = '';
/** The test's own folder on tmpfs. */
let memory = '';

test.before(async () => {
  if (!needFacility(shmUsable, 'a tmpfs on /dev/shm', 'Linux with /dev/shm a tmpfs')) return;
  disk = diskFolder('stash-disk-');
  const type = spawnSync('stat', ['-f', '-c', '%T', disk], { encoding: 'utf8' }).stdout.trim();
  assert.is.not(type, 'tmpfs', `${disk} must be on a disk`);
  assert.is(inMemory(disk), false);
  memory = mkdtempSync(join(SHM_DIR, 'stash-memory-test-'));
  t = cliEnv();
  await t.initVault(['work']);
  const r = await t.run(['set', 'work', 'PEM', '--raw', '--password-file', t.pwFile], { input: 'pem-secret-1\n' });
  assert.is(r.code, 0, r.stderr);
});

test.after(async () => {
  if (!shmUsable) return;
  await t.dispose();
  rmSync(disk, { recursive: true, force: true });
  rmSync(memory, { recursive: true, force: true });
});

test('the chooser: an own tmpfs XDG_RUNTIME_DIR, else /dev/shm, else nothing, saying why', () => {
  if (!shmUsable) return;
  const shm = SHM_DIR;
  assert.equal(memoryParent({ runtime: memory, shm, uid }), { parent: memory, problems: [] });
  assert.equal(memoryParent({ runtime: disk, shm, uid }), {
    parent: shm,
    problems: [`XDG_RUNTIME_DIR (${disk}) is not a tmpfs`],
  });
  assert.equal(memoryParent({ runtime: undefined, shm, uid }).parent, shm);
  assert.equal(memoryParent({ runtime: join(disk, 'gone'), shm, uid }).problems, [
    `XDG_RUNTIME_DIR (${join(disk, 'gone')}) does not exist`,
  ]);
  assert.equal(memoryParent({ runtime: disk, shm: disk, uid }), {
    parent: null,
    problems: [`XDG_RUNTIME_DIR (${disk}) is not a tmpfs`, `${disk} is not a tmpfs`],
  });
  assert.equal(memoryParent({ runtime: '', shm: join(disk, 'none'), uid }), {
    parent: null,
    problems: ['XDG_RUNTIME_DIR is not set', `${join(disk, 'none')} does not exist`],
  });
  if (isRoot) {
    const theirs = join(memory, 'theirs');
    mkdirSync(theirs, { mode: 0o700 });
    chownSync(theirs, 65534, 65534);
    assert.equal(memoryParent({ runtime: theirs, shm, uid }), {
      parent: shm,
      problems: [`XDG_RUNTIME_DIR (${theirs}) belongs to another user`],
    });
  }
});

/** The program run by `stash run --file`: its file's folder, that folder's file system, and the value. */
const SHOW = 'd="$(dirname "$F")"; echo "$d"; stat -f -c %T "$d"; stat -c %a "$d"; cat "$F"';

test('run --file with XDG_RUNTIME_DIR on a disk folder: the file is on tmpfs (/dev/shm), nothing in that folder', async () => {
  if (!shmUsable) return;
  for (const runtime of [disk, undefined]) {
    const r = await t.run(['run', '--file', 'F=stash://work/PEM', '--', 'sh', '-c', `${SHOW}; ls -A "${disk}"`], {
      env: { XDG_RUNTIME_DIR: runtime },
    });
    assert.is(r.code, 0, r.stderr);
    const [folder, type, mode, value, ...listed] = r.stdout.trim().split('\n');
    assert.match(folder!, new RegExp(`^${SHM_DIR}/stash-run-\\w+$`), `XDG_RUNTIME_DIR=${runtime}`);
    assert.is(type, 'tmpfs');
    assert.is(mode, '700');
    assert.is(value, 'pem-secret-1');
    assert.equal(listed, [], 'nothing in the disk folder while the program runs');
    assert.not.ok(existsSync(folder!), 'the folder is removed afterwards');
  }
  assert.equal(readdirSync(disk), []);
  const own = await t.run(['run', '--file', 'F=stash://work/PEM', '--', 'sh', '-c', SHOW], {
    env: { XDG_RUNTIME_DIR: memory },
  });
  assert.match(
    own.stdout,
    new RegExp(`^${memory}/stash-run-\\w+\\ntmpfs\\n700\\n`),
    'XDG_RUNTIME_DIR first when it is a tmpfs',
  );
});

test('no tmpfs at all (/dev/shm a disk folder in a mount namespace): refused (69) before the program and any password', async () => {
  if (!shmUsable) return;
  const wrap = shmReplacedBy(disk);
  if (wrap === null) return;
  assert.is((await t.run(['vault', 'sessions', 'lock-all'])).code, 0);
  const marker = join(disk, 'ran');
  const refused = await t.run(['run', '--file', 'F=stash://work/PEM', '--', 'touch', marker], {
    env: { XDG_RUNTIME_DIR: disk },
    wrap,
  });
  assert.is(refused.code, 69, refused.stderr);
  assert.match(
    refused.stderr,
    new RegExp(
      `^stash: there is no private tmpfs for the file \\(XDG_RUNTIME_DIR \\(${disk}\\) is not a tmpfs, and /dev/shm is not a tmpfs\\)`,
    ),
  );
  assert.match(refused.stderr, /mount a tmpfs on \/dev\/shm, or add --insecure-tmp/);
  assert.not.match(refused.stderr, /password/i, 'refused before any password is asked');
  assert.equal(readdirSync(disk), [], 'nothing written, and the program did not run');
  const insecure = await t.run(
    [
      'run',
      '--insecure-tmp',
      '--password-file',
      t.pwFile,
      '--file',
      'F=stash://work/PEM',
      '--',
      'sh',
      '-c',
      'cat "$F"',
    ],
    { env: { XDG_RUNTIME_DIR: undefined }, wrap },
  );
  assert.is(insecure.code, 0, insecure.stderr);
  assert.is(insecure.stdout, 'pem-secret-1\n');
  assert.match(
    insecure.stderr,
    /^stash: warning: there is no private tmpfs \(XDG_RUNTIME_DIR is not set, and \/dev\/shm is not a tmpfs\): the secret is written to a file in .*\(--insecure-tmp\)/,
  );
});

test.run();
