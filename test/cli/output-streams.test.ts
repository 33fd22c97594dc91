/**
 * Closed and full output streams, for both executables (issue 16, item 4):
 * every command that writes to stdout ends quietly with status 0 when its
 * reader has gone (`| head -1`), a full disk (`>/dev/full`) is one line and
 * status 74, a closed stderr never crashes a command, and the developer key
 * server outlives its stderr reader and still removes its state folder.
 *
 * "Closed" is made deterministic: the test closes its end of the pipe before
 * the command has written anything, so the first write fails with EPIPE.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { spawn, spawnSync } from 'node:child_process';
import { closeSync, existsSync, mkdtempSync, openSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stashBin } from '../helpers/agent.js';
import { cliEnv, type CliEnv } from './harness.js';

const serverBin = join(process.cwd(), 'bin', 'stash_key_server.js');

interface Ended {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/**
 * Runs `bin` with `args`; `closed` names the stream whose reader is gone
 * before the command starts writing; `full` sends stdout to /dev/full.
 */
function runWith(
  bin: string,
  args: string[],
  env: NodeJS.ProcessEnv,
  how: { closed?: 'stdout' | 'stderr'; full?: boolean },
): Promise<Ended> {
  return new Promise((resolve, reject) => {
    const full = how.full ? openSync('/dev/full', 'w') : undefined;
    const child = spawn(process.execPath, [bin, ...args], {
      env,
      stdio: ['ignore', full ?? 'pipe', 'pipe'],
      detached: true,
    });
    if (full !== undefined) closeSync(full);
    let stdout = '';
    let stderr = '';
    if (how.closed === 'stdout') child.stdout!.destroy();
    else
      child.stdout?.on('data', (d) => {
        stdout += d;
      });
    if (how.closed === 'stderr') child.stderr!.destroy();
    else
      child.stderr!.on('data', (d) => {
        stderr += d;
      });
    const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
    child.on('error', reject);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr });
    });
  });
}

const noStack = (r: Ended, what: string): void => {
  assert.not.match(
    r.stderr,
    /\n\s+at |node:events|Unhandled 'error'|EPIPE/,
    `${what}: no stack trace or raw EPIPE: ${r.stderr}`,
  );
};

/** Every stash command that writes to stdout, runnable without a terminal in a vault holding work/K. */
const STASH_COMMANDS: string[][] = [
  ['--help'],
  ['--version'],
  ['get', '--help'],
  ['doctor'],
  ['doctor', '--json'],
  ['container', 'list'],
  ['vault', 'identity', 'show'],
  ['vault', 'contact', 'list'],
  ['vault', 'sessions'],
  ['vault', 'sessions', 'auto-unlock', 'status'],
  ['ls', 'work'],
  ['ls', 'work', '--json'],
  ['get', 'work', 'K'],
  ['container', 'create', 'more'],
  ['vault', 'sessions', 'lock-all'],
];

let t: CliEnv;
let root: string;
/** The vault's password comes from a file: `vault sessions lock-all` runs in between. */
let env: NodeJS.ProcessEnv;

test.before(async () => {
  t = cliEnv();
  await t.initVault(['work']);
  const set = await t.run(['set', 'work', 'K', '--password-file', t.pwFile], { input: 'value\n' });
  assert.is(set.code, 0, set.stderr);
  root = mkdtempSync(join(tmpdir(), 'stash-output-streams-'));
  env = { ...t.env, STASH_PASSWORD_FILE: t.pwFile };
});

test.after(async () => {
  await t.dispose();
  rmSync(root, { recursive: true, force: true });
});

test('stash: every stdout-writing command ends quietly with 0 when its reader has gone', async () => {
  for (const args of STASH_COMMANDS) {
    const r = await runWith(stashBin, args, env, { closed: 'stdout' });
    noStack(r, args.join(' '));
    assert.is(r.code, 0, `stash ${args.join(' ')}: exit ${r.code} ${r.signal ?? ''}: ${r.stderr}`);
    assert.is(r.stderr.replace(/stash: warning: [^\n]*\n/g, ''), '', `stash ${args.join(' ')} is quiet: ${r.stderr}`);
  }
});

test('stash_key_server: --help, --version, install and status end quietly with 0 when their reader has gone', async () => {
  const env = { ...process.env, STASH_KEY_SERVER_ROOT_PREFIX: root };
  for (const args of [
    ['--help'],
    ['--version'],
    ['run', '--help'],
    ['install', '--acme-domain', 'keys.example.org'],
    ['status'],
  ]) {
    const r = await runWith(serverBin, args, env, { closed: 'stdout' });
    noStack(r, args.join(' '));
    assert.is(r.code, 0, `stash_key_server ${args.join(' ')}: exit ${r.code}: ${r.stderr}`);
  }
});

test('| head -1 in a real shell: doctor, container list, identity show, stash_key_server install', () => {
  const sh = (line: string, shEnv: NodeJS.ProcessEnv): { status: number; head: string; stderr: string } => {
    const r = spawnSync('bash', ['-c', `${line} | head -1; exit "\${PIPESTATUS[0]}"`], {
      env: shEnv,
      encoding: 'utf8',
      timeout: 30_000,
    });
    return { status: r.status ?? -1, head: r.stdout, stderr: r.stderr };
  };
  const node = JSON.stringify(process.execPath);
  // doctor's status is its own when it finished writing before head closed the pipe
  const plain = spawnSync(process.execPath, [stashBin, 'doctor'], { env, encoding: 'utf8', timeout: 30_000 });
  for (const [line, expected] of [
    [`${node} ${stashBin} doctor`, [0, plain.status]],
    [`${node} ${stashBin} container list`, [0]],
    [`${node} ${stashBin} vault identity show`, [0]],
  ] as Array<[string, number[]]>) {
    const r = sh(line, env);
    assert.ok(expected.includes(r.status), `${line}: exit ${r.status}: ${r.stderr}`);
    assert.is(r.head.split('\n').length, 2, `one line: ${r.head}`);
    noStack({ code: r.status, signal: null, stdout: '', stderr: r.stderr }, line);
  }
  const install = sh(`${node} ${serverBin} install --acme-domain keys.example.org`, {
    ...process.env,
    STASH_KEY_SERVER_ROOT_PREFIX: root,
  });
  assert.is(install.status, 0, install.stderr);
  assert.match(install.head, /^wrote /);
});

test('stash get >/dev/full: one stash: line, exit 74; --help too', async () => {
  const get = await runWith(stashBin, ['get', 'work', 'K'], env, { full: true });
  assert.is(get.code, 74, get.stderr);
  assert.is(get.stderr, 'stash: cannot write to standard output: no space left on device (ENOSPC)\n');
  const help = await runWith(stashBin, ['--help'], env, { full: true });
  assert.is(help.code, 74, help.stderr);
  assert.is(help.stderr.split('\n').length, 2, help.stderr);
  const server = await runWith(serverBin, ['--help'], process.env, { full: true });
  assert.is(server.code, 74, server.stderr);
  assert.is(server.stderr, 'stash_key_server: cannot write to standard output: no space left on device (ENOSPC)\n');
});

test('a closed stderr: the command ends with its own status, no crash', async () => {
  const missing = await runWith(stashBin, ['get', 'work', 'NOPE'], env, { closed: 'stderr' });
  assert.is(missing.code, 66);
  const set = await runWith(stashBin, ['set', 'work', 'L', '--allow-empty'], env, { closed: 'stderr' });
  assert.is(set.code, 0, 'set writes its notice to a closed stderr and still succeeds');
  const usage = await runWith(serverBin, ['--frob'], process.env, { closed: 'stderr' });
  assert.is(usage.code, 64);
});

test('developer key server: its stderr reader goes away, Ctrl-C still removes the state folder', async () => {
  const child = spawn(process.execPath, [serverBin, 'run', '--developer', '--bind', '127.0.0.1:0'], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  child.stdout!.on('data', (d) => {
    stdout += d;
  });
  const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
  const deadline = Date.now() + 20_000;
  while (!/listening on/.test(stdout) && Date.now() < deadline && child.exitCode === null)
    await new Promise((r) => setTimeout(r, 20));
  const state = /state (\S+)\)/.exec(stdout)?.[1];
  assert.ok(state && existsSync(state), `developer state folder: ${stdout}`);
  child.stderr!.destroy(); // tee killed by Ctrl-C
  await new Promise((r) => setTimeout(r, 100));
  child.kill('SIGINT'); // the same Ctrl-C reaches the server
  const code = await exited;
  assert.is(code, 0, 'a clean shutdown');
  assert.not.ok(existsSync(state!), `${state} removed`);
});

test.run();
