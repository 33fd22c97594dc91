/**
 * `stash edit` through the real binary with editors that are shell scripts:
 * the edited value stored byte for byte, the file 0600 in a 0700 folder on a
 * tmpfs, overwritten (a hard link made by the editor reads zeros afterwards)
 * and removed, also after Ctrl-C on a real pseudo-terminal and after SIGTERM;
 * /dev/shm when XDG_RUNTIME_DIR is unset or on disk, the refusal without any
 * tmpfs (in a mount namespace), with an empty result, a failing or missing
 * editor.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { chmodSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { stashBin, waitFor } from '../helpers/agent.js';
import { needFacility } from '../helpers/facility.js';
import { inMemory } from '../../src/cli/memory-folder.js';
import { cliEnv, diskFolder, havePty, shmReplacedBy, snapshot, type CliEnv } from './harness.js';

const usable = process.platform === 'linux' && existsSync('/dev/shm') && inMemory('/dev/shm') === true;
let t: CliEnv;
let runtime = '';
// Lines with CRLF, a tab, UTF-8, no final newline: all must survive.
const VALUE = 'line one\r\nline\ttwo → three\nlast line without newline';

function editor(name: string, body: string): string {
  const path = join(t.home, name);
  writeFileSync(path, `#!/bin/sh\n${body}\n`);
  chmodSync(path, 0o755);
  return path;
}

/** What the editor saw, written by the scripts below: modes, file system, path. */
const seen = (): string[] => readFileSync(join(t.home, 'seen'), 'utf8').trim().split('\n');

/** Records what the editor was given and hard-links the file, so the test can read its inode after stash removed it. */
const RECORD = `f="$1"; { stat -c %a "$f"; stat -c %a "$(dirname "$f")"; stat -f -c %T "$f"; echo "$f"; } > "${'$'}HOME/seen"; ln "$f" "$XDG_RUNTIME_DIR/witness"`;

async function getValue(name = 'K'): Promise<string> {
  const r = await t.run(['get', 'c', name]);
  assert.is(r.code, 0, r.stderr);
  return r.stdout;
}

/** Every regular file under `dir` (the agent's socket is not one). */
function filesUnder(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile())
    .map((e) => join(e.parentPath ?? e.path, e.name));
}

function leftovers(): string[] {
  return readdirSync(runtime).filter((n) => n.startsWith('stash-edit-'));
}

test.before(async () => {
  if (!needFacility(usable, 'a tmpfs for XDG_RUNTIME_DIR', '/dev/shm is not a tmpfs here (Linux)')) return;
  runtime = mkdtempSync('/dev/shm/stash-edit-test-');
  t = cliEnv({ XDG_RUNTIME_DIR: runtime, VISUAL: undefined, EDITOR: undefined });
  t.env.STASH_PASSWORD_FILE = t.pwFile;
  await t.initVault(['c']);
});

test.after(async () => {
  if (!usable) return;
  await t.dispose();
  rmSync(runtime, { recursive: true, force: true });
});

test.before.each(async () => {
  if (!usable) return;
  rmSync(join(runtime, 'witness'), { force: true });
  const r = await t.run(['set', 'c', 'K', '--raw'], { input: VALUE });
  assert.is(r.code, 0, r.stderr);
});

test('an editor that appends a line: the new value is stored byte for byte, and no copy is left', async () => {
  if (!usable) return;
  // Spelt out by printf so that the script itself does not hold the text searched for below.
  const ed = editor('append.sh', `${RECORD}\nprintf 'appended %s\\n' line >> "$1"`);
  const r = await t.run(['edit', 'c', 'K'], { env: { EDITOR: ed } });
  assert.is(r.code, 0, r.stderr);
  assert.is(r.stderr, 'Stored the edited K in c.\n');
  const expected = `${VALUE}appended line\n`;
  assert.is(await getValue(), expected);
  const [fileMode, dirMode, fsType, path] = seen();
  assert.is(fileMode, '600');
  assert.is(dirMode, '700');
  assert.is(fsType, 'tmpfs');
  assert.ok(path!.startsWith(`${runtime}/stash-edit-`), path);
  assert.not.ok(existsSync(path!), 'the file is removed');
  assert.equal(leftovers(), [], 'and its folder');
  const witness = readFileSync(join(runtime, 'witness'));
  assert.is(witness.length, Buffer.byteLength(expected));
  assert.ok(
    witness.every((b) => b === 0),
    'the file was overwritten with zeros before it was removed',
  );
  for (const file of filesUnder(t.home)) {
    assert.not.ok(readFileSync(file).includes('appended line'), `no plaintext in ${file}`);
  }
});

test('VISUAL wins over EDITOR; an editor command with arguments works; unchanged stores nothing', async () => {
  if (!usable) return;
  const visual = editor('visual.sh', `[ "$1" = --flag ] || exit 9\nprintf '+visual' >> "$2"`);
  const r = await t.run(['edit', 'c', 'K'], { env: { VISUAL: `${visual} --flag`, EDITOR: '/bin/false' } });
  assert.is(r.code, 0, r.stderr);
  assert.is(await getValue(), `${VALUE}+visual`);
  const before = snapshot(t.vault);
  const same = await t.run(['edit', 'c', 'K'], { env: { EDITOR: 'true' } });
  assert.is(same.code, 0, same.stderr);
  assert.is(same.stderr, 'K is unchanged; nothing was stored.\n');
  assert.equal(snapshot(t.vault), before, 'no vault file was rewritten');
  assert.equal(leftovers(), []);
});

test('a failing editor, a missing one, an empty result: nothing stored, the file removed', async () => {
  if (!usable) return;
  const fails = editor('fails.sh', `printf 'half-done' >> "$1"; exit 3`);
  let r = await t.run(['edit', 'c', 'K'], { env: { EDITOR: fails } });
  assert.is(r.code, 1, r.stderr);
  assert.match(r.stderr, /^stash: the editor exited with status 3; K was not changed\n$/);
  r = await t.run(['edit', 'c', 'K'], { env: { EDITOR: '/nonexistent/editor' } });
  assert.is(r.code, 127, r.stderr);
  assert.match(r.stderr, /the editor was not found \(set VISUAL or EDITOR\)/);
  r = await t.run(['edit', 'c', 'K'], { env: { EDITOR: editor('empties.sh', ': > "$1"') } });
  assert.is(r.code, 64, r.stderr);
  assert.match(r.stderr, /the edited value of K is empty; nothing was stored/);
  r = await t.run(['edit', 'c', 'MISSING'], { env: { EDITOR: 'true' } });
  assert.is(r.code, 66, r.stderr);
  assert.is(await getValue(), VALUE);
  assert.equal(leftovers(), []);
});

test('XDG_RUNTIME_DIR unset or on disk: the file goes to /dev/shm; no tmpfs at all: refused (69) before any password', async () => {
  if (!usable) return;
  const disk = diskFolder('stash-edit-disk-');
  try {
    assert.is(inMemory(disk), false, `${disk} is on a disk`);
    const where = editor(
      'where.sh',
      `stat -f -c %T "$1" > "$HOME/seen"; dirname "$1" >> "$HOME/seen"; printf '+shm' >> "$1"`,
    );
    for (const runtime of [undefined, disk]) {
      const r = await t.run(['edit', 'c', 'K'], { env: { XDG_RUNTIME_DIR: runtime, EDITOR: where } });
      assert.is(r.code, 0, r.stderr);
      const [type, folder] = seen();
      assert.is(type, 'tmpfs');
      assert.match(folder!, /^\/dev\/shm\/stash-edit-\w+$/);
      assert.not.ok(existsSync(folder!), 'removed afterwards');
    }
    assert.equal(readdirSync(disk), [], 'nothing in the folder on disk');
    assert.is(await getValue(), `${VALUE}+shm+shm`);
    // /dev/shm a folder on disk too, in a mount namespace of the command's own.
    const wrap = shmReplacedBy(disk);
    if (wrap === null) return;
    assert.is((await t.run(['vault', 'sessions', 'lock-all'])).code, 0);
    const append = editor('append2.sh', `printf '+insecure' >> "$1"`);
    const r = await t.run(['edit', 'c', 'K'], {
      env: { XDG_RUNTIME_DIR: disk, EDITOR: append, STASH_PASSWORD_FILE: '' },
      wrap,
    });
    assert.is(r.code, 69, r.stderr);
    assert.match(
      r.stderr,
      /there is no private tmpfs for the file \(XDG_RUNTIME_DIR \(.*\) is not a tmpfs, and \/dev\/shm is not a tmpfs\)/,
    );
    assert.match(r.stderr, /add --insecure-tmp to use the temporary folder, which may be on disk/);
    assert.equal(readdirSync(disk), []);
    const ok = await t.run(['edit', 'c', 'K', '--insecure-tmp'], {
      env: { XDG_RUNTIME_DIR: '', EDITOR: append },
      wrap,
    });
    assert.is(ok.code, 0, ok.stderr);
    assert.match(
      ok.stderr,
      /^stash: warning: there is no private tmpfs \(XDG_RUNTIME_DIR is not set, and \/dev\/shm is not a tmpfs\): the secret is written to a file in .*\(--insecure-tmp\)/,
      ok.stderr,
    );
    assert.is(await getValue(), `${VALUE}+shm+shm+insecure`);
  } finally {
    rmSync(disk, { recursive: true, force: true });
  }
});

test('Ctrl-C while the editor runs: the editor ends, nothing is stored, the file is overwritten and removed (exit 130)', async () => {
  if (!usable) return;
  if (!needFacility(havePty(), 'pseudo-terminal', 'needs /usr/bin/python3 with the pty module')) return;
  // The process that says EDITING is the one that waits: a shell between them (dash) would hold a Ctrl-C
  // that came before it started the wait, and wait out the whole sleep.
  const ed = editor(
    'waits.sh',
    `${RECORD}\nprintf '+never' >> "$1"\nexec perl -e '$| = 1; print "EDITING\\n"; sleep 20'`,
  );
  const r = t.pty(['edit', 'c', 'K'], [['EDITING', '\u0003']], { env: { EDITOR: ed } });
  assert.is(r.status, 130, r.output);
  assert.match(r.output, /The editor was ended by SIGINT; K was not changed\./);
  assert.is(await getValue(), VALUE);
  assert.not.ok(existsSync(seen()[3]!));
  assert.equal(leftovers(), []);
  const witness = readFileSync(join(runtime, 'witness'));
  assert.ok(witness.length > 0 && witness.every((b) => b === 0), 'overwritten before removal');
});

test('SIGTERM to stash while the editor runs: passed on to the editor, the file removed, exit 143', async () => {
  if (!usable) return;
  const ed = editor('waits2.sh', `${RECORD}\ntouch "$HOME/ready"\nexec sleep 20`);
  const child = spawn(process.execPath, [stashBin, 'edit', 'c', 'K'], {
    env: { ...t.env, EDITOR: ed },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr.on('data', (d) => {
    stderr += d;
  });
  try {
    await waitFor(() => existsSync(join(t.home, 'ready')), 15_000, 'the editor to start');
    child.kill('SIGTERM');
    const [code, signal] = await once(child, 'exit');
    assert.is(code, 143, `${signal} ${stderr}`);
  } finally {
    child.kill('SIGKILL');
    rmSync(join(t.home, 'ready'), { force: true });
  }
  assert.not.ok(existsSync(seen()[3]!));
  assert.equal(leftovers(), []);
  assert.ok(readFileSync(join(runtime, 'witness')).every((b) => b === 0));
  assert.is(await getValue(), VALUE);
});

test.run();
