/**
 * `stash __agent_security_check` as a user runs it: a child process of
 * bin/stash.js, exit 0 and "safe" on a private folder, exit 1 and the reason
 * when the socket folder is open to others, 64 on a bad argument.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { spawnSync } from 'node:child_process';
import { chmodSync, mkdirSync } from 'node:fs';
import { agentEnv, stashBin } from '../helpers/agent.js';

function check(env: NodeJS.ProcessEnv, ...args: string[]) {
  const r = spawnSync(process.execPath, [stashBin, '__agent_security_check', ...args], {
    env,
    encoding: 'utf8',
    timeout: 20_000,
  });
  return { status: r.status, out: r.stdout, err: r.stderr };
}

test('a private socket folder: every check ok, exit 0', () => {
  const t = agentEnv();
  try {
    mkdirSync(t.dir, { mode: 0o700 });
    const r = check(t.env);
    assert.is(r.status, 0, r.out + r.err);
    assert.match(r.out, /^ok +socket folder: .*mode 0700/m);
    assert.match(r.out, /^ok +peer credentials: SO_PEERCRED/m);
    assert.match(r.out, /^ok +dumpable: not dumpable/m);
    assert.match(r.out, /^ok +core dumps: RLIMIT_CORE 0/m);
    assert.match(r.out, /agent security posture: safe$/m);
    const j = check(t.env, '--json');
    assert.is(j.status, 0);
    const doc = JSON.parse(j.out) as { ok: boolean; checks: Array<{ name: string; ok: boolean }> };
    assert.is(doc.ok, true);
    assert.ok(
      doc.checks.some((c) => c.name === 'mlock limit'),
      'reports the mlock limit',
    );
  } finally {
    t.cleanup();
  }
});

test('a socket folder open to others: FAIL with the reason, exit 1', () => {
  const t = agentEnv();
  try {
    mkdirSync(t.dir, { mode: 0o700 });
    chmodSync(t.dir, 0o755);
    const r = check(t.env);
    assert.is(r.status, 1, r.out + r.err);
    assert.match(r.out, /^FAIL +socket folder: .*has mode 0755; it must be 0700/m);
    assert.match(r.out, /agent security posture: UNSAFE$/m);
  } finally {
    t.cleanup();
  }
});

test('an unknown argument is a usage error', () => {
  const t = agentEnv();
  try {
    const r = check(t.env, '--bogus');
    assert.is(r.status, 64);
    assert.match(r.err, /unknown argument --bogus/);
  } finally {
    t.cleanup();
  }
});

test.run();
