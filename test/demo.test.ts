/**
 * `npm run demo` (scripts/demo.js) for real: a developer key server, two
 * vaults, publish, confirm, receive. It must end with exit 0, show the
 * fingerprint match and the contact, and leave nothing behind: no temporary
 * folder, no agent, no server. A failure and a Ctrl-C must clean up as well.
 * Each run gets its own TMPDIR, so "left behind" is checked exactly: the
 * folder is empty and no process carries it in its environment.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sleep } from './helpers/agent.js';

interface DemoRun {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  tmp: string;
}

/** Runs the demo with a private TMPDIR; `interruptAt` sends SIGINT once stdout matches it. */
function runDemo(opts: { env?: NodeJS.ProcessEnv; interruptAt?: RegExp } = {}): Promise<DemoRun> {
  const tmp = mkdtempSync(join(tmpdir(), 'stash-demo-test-'));
  const env: NodeJS.ProcessEnv = { ...process.env, TMPDIR: tmp, ...opts.env };
  for (const k of Object.keys(env)) if (k.startsWith('STASH_')) delete env[k];
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [join(process.cwd(), 'scripts', 'demo.js')], {
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    let interrupted = false;
    child.stdout.on('data', (d) => {
      stdout += d;
      if (opts.interruptAt && !interrupted && opts.interruptAt.test(stdout)) {
        interrupted = true;
        child.kill('SIGINT');
      }
    });
    child.stderr.on('data', (d) => {
      stderr += d;
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), 90_000);
    child.on('error', reject);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr, tmp });
    });
  });
}

/** Pids of live processes whose environment mentions `dir` (agents, the server, stray commands). */
function processesUsing(dir: string): number[] {
  const out: number[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name) || Number(name) === process.pid) continue;
    try {
      if (readFileSync(`/proc/${name}/environ`, 'latin1').includes(dir)) out.push(Number(name));
    } catch {
      /* gone, or not ours */
    }
  }
  return out;
}

async function assertNothingLeft(r: DemoRun): Promise<void> {
  try {
    assert.equal(readdirSync(r.tmp), [], 'the demo removed its temporary folder (and the server its state folder)');
    // A detached agent that was told to stop may need a moment to be reaped.
    for (let i = 0; i < 50 && processesUsing(r.tmp).length > 0; i++) await sleep(100);
    const left = processesUsing(r.tmp);
    const describe = left.map((pid) => {
      try {
        return `${pid}: ${readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ')}`;
      } catch {
        return String(pid);
      }
    });
    assert.equal(describe, [], 'no agent, server or command left running');
  } finally {
    for (const pid of processesUsing(r.tmp)) process.kill(pid, 'SIGKILL');
    rmSync(r.tmp, { recursive: true, force: true });
  }
}

test('the demo runs end to end: exit 0, the fingerprint matches, the contact is listed, nothing is left behind', async () => {
  const r = await runDemo();
  try {
    assert.is(r.code, 0, `${r.stdout}\n${r.stderr}`);
    const fp = /^Alice \$ stash vault init[\s\S]*?Fingerprint: (\S+)/m.exec(r.stdout)?.[1];
    assert.ok(fp && /^[0-9A-Z]{4}(-[0-9A-Z]{4}){5}$/.test(fp), "Alice's fingerprint is shown");
    const code = /Share code: {2}(\S+)/.exec(r.stdout)?.[1];
    assert.ok(code, 'the share code is shown');
    assert.match(
      r.stdout,
      new RegExp(
        `Bob \\$ stash vault contact receive ${code} --fingerprint ${fp} --name alice --server http://127\\.0\\.0\\.1:\\d+\\n`,
      ),
    );
    assert.ok(
      r.stdout.includes(`    Fingerprint matches: ${fp}\n    Added contact alice <alice@example.test>\n`),
      r.stdout,
    );
    assert.match(r.stdout, new RegExp(`\\n {4}alice {2}alice@example\\.test {2}${fp} {2}\\d{4}-\\d\\d-\\d\\d\\n`));
    assert.match(
      r.stdout,
      /stash: fingerprint mismatch: [^\n]*no contact was added[^\n]*\n {4}\(exit status 65\)/,
      'the wrong fingerprint is refused first',
    );
    assert.match(r.stdout, /key server \| info verify: share [0-9A-V]{2}… confirmed by a\*\*\*@example\.test/);
    assert.match(
      r.stdout,
      /Bob \$ stash vault sessions\n {4}NAME {5}PATH +EXPIRES IN\n {4}\(vault\) {2}\S+\/bob\/vault +1[45]m \d\ds\n {4}deploy /,
    );
    // The tour's everyday half: create, set, get, ls, env.
    assert.match(r.stdout, /Bob \$ stash container create deploy\n/);
    assert.match(
      r.stdout,
      /Bob \$ echo demo-token-123 \| stash set deploy API_TOKEN\n {4}Stored API_TOKEN in deploy\.\n/,
    );
    assert.match(r.stdout, /Bob \$ stash get deploy API_TOKEN\n {4}demo-token-123\n/);
    assert.match(r.stdout, /the command sees API_TOKEN=demo-token-123/);
    assert.match(
      r.stdout,
      /Alice \$ stash vault sessions stop\n {4}Stopped the agent \(pid \d+\); its keys were wiped\./,
    );
    assert.match(
      r.stdout,
      /Bob \$ stash vault sessions stop\n {4}Stopped the agent \(pid \d+\); its keys were wiped\./,
    );
    assert.match(r.stdout, /\nkey server stopped\nremoved \S+stash-demo-\w+\n/);
    assert.match(r.stdout, /\nDemo complete: /);
  } finally {
    await assertNothingLeft(r);
  }
});

test('a failing step: exit 1 with a clear message, and everything is still cleaned up', async () => {
  // Without node on PATH the demo mail command (#!/usr/bin/env node) cannot run, so publish fails.
  const r = await runDemo({ env: { PATH: '/nonexistent' } });
  try {
    assert.is(r.code, 1, r.stdout);
    assert.match(
      r.stdout,
      /stash: the key was stored but cannot be received: the verification email could not be sent [^\n]*\n {4}\(exit status 69\)/,
    );
    assert.match(
      r.stderr,
      /^\ndemo: FAILED: `stash vault identity publish --email alice@example\.test --server http:\/\/127\.0\.0\.1:\d+` \(as Alice\) exited with 69, expected 0\n/,
    );
    assert.match(r.stderr, /demo: stopped the agents and the key server, removed \S+stash-demo-\w+\n$/);
  } finally {
    await assertNothingLeft(r);
  }
});

test('Ctrl-C in the middle: exit 130, agents and server stopped, folder removed', async () => {
  const r = await runDemo({ interruptAt: /== 5\. Bob creates his vault/ });
  try {
    assert.is(r.code, 130, `${r.stdout}\n${r.stderr}`);
    assert.match(r.stderr, /demo: SIGINT: stopping the agents and the key server, removing the temporary folder\n/);
    assert.not.match(r.stdout, /Demo complete/);
  } finally {
    await assertNothingLeft(r);
  }
});

test.run();
