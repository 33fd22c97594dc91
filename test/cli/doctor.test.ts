/**
 * `stash doctor` passes on a healthy setup (real agent, logind stand-in on a
 * private system bus, a fresh vault) and names the fault, with a fix, on a
 * broken one: socket folder 0755, no logind, a bad config file, vault files
 * readable by others. Exit status 0 only when nothing failed.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { chmodSync, chownSync, lchownSync, mkdirSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { logindBusFacility, startLogindBus } from '../fixtures/logind-bus.js';
import { addSession } from '../fixtures/logind-session.js';
import { agentPids } from '../helpers/agent.js';
import { needFacility } from '../helpers/facility.js';
import { cliEnv, type CliEnv } from './harness.js';

interface Check {
  section: string;
  name: string;
  status: string;
  detail: string;
  fix?: string;
}
interface Report {
  ok: boolean;
  checks: Check[];
  agent: Record<string, unknown> | null;
  config: { settings: Record<string, { value: unknown; source: string; from: string | null }> } | null;
}

async function doctor(
  t: CliEnv,
  env: NodeJS.ProcessEnv = {},
): Promise<{ code: number | null; report: Report; text: string }> {
  const json = await t.run(['doctor', '--json'], { env });
  const text = await t.run(['doctor'], { env });
  assert.is(json.code, text.code, 'text and JSON agree on the status');
  return { code: json.code, report: JSON.parse(json.stdout) as Report, text: text.stdout };
}

const check = (r: Report, name: string): Check => {
  const c = r.checks.find((x) => x.name === name);
  assert.ok(c, `check ${name} present`);
  return c!;
};

test('healthy setup: every check passes, exit 0', async () => {
  const facility = logindBusFacility();
  if (!needFacility(facility.available, 'logind stand-in', facility.reason)) return;
  const bus = await startLogindBus();
  // A desktop session the agent runs in: its lock is watched (test/cli/session-lock.test.ts has the rest).
  const session = await addSession(bus, 'doctor');
  const t = cliEnv({ DBUS_SYSTEM_BUS_ADDRESS: bus.address, XDG_SESSION_ID: session.id });
  try {
    // A real Argon2id cost: the test preset is a warning of its own.
    const init = await t.run(['vault', 'init', '--password-file', t.pwFile, '--kdf', 'interactive']);
    assert.is(init.code, 0, init.stderr);
    const create = await t.run(['container', 'create', 'work', '--password-file', t.pwFile]);
    assert.is(create.code, 0, create.stderr);
    const { code, report, text } = await doctor(t);
    assert.is(code, 0, text);
    assert.ok(report.ok);
    assert.equal(
      report.checks.filter((c) => c.status === 'fail' || c.status === 'warn'),
      [],
    );
    for (const name of [
      'agent running',
      'agent hardening',
      'socket folder',
      'peer credentials',
      'dumpable',
      'core dumps',
      'mlock limit',
      'inhibitor backend',
      'delay lock',
      'block lock',
      'suspend listener',
      'logind session',
      'screen lock wipe',
      'config file',
      'vault',
      'vault files',
      'vault permissions',
      'identity',
      'containers',
    ]) {
      assert.is(check(report, name).status, 'ok', `${name}: ${check(report, name).detail}`);
    }
    assert.match(check(report, 'inhibitor backend').detail, /^logind via libsystemd\.so\.0$/);
    assert.match(check(report, 'agent running').detail, /^pid \d+, up \d+s, 1 cached key\(s\), no activities/);
    assert.match(text, /^Session agent\n\[ ok \] agent running: pid \d+/);
    assert.match(text, /\nNo problems found\.\n$/);
    const inhibitors = await bus.listInhibitors();
    assert.ok(
      inhibitors.some((i) => i.mode === 'delay' && i.who === 'stash'),
      'the delay lock doctor reports is really held',
    );
  } finally {
    await t.dispose();
    await bus.stop();
  }
});

/** A /sys/power/state stand-in (STASH_SYS_POWER_STATE): this test machine's own file is empty. */
function powerState(t: CliEnv, states: string): string {
  const path = join(t.home, 'power-state');
  writeFileSync(path, states);
  return path;
}

test("a bad STASH_AGENT_TRANSPORT fails the agent line with its fix (Configuration shows the agent's settings, not this one)", async () => {
  const t = cliEnv();
  try {
    await t.initVault(['work']);
    const { code, report } = await doctor(t, { STASH_AGENT_TRANSPORT: 'fast' });
    assert.is(code, 1);
    const agent = check(report, 'agent running');
    assert.is(agent.status, 'fail');
    assert.is(agent.detail, 'STASH_AGENT_TRANSPORT must be auto, blocking or net; got "fast"');
    assert.is(agent.fix, 'set STASH_AGENT_TRANSPORT to auto (the default), blocking or net, or unset it');
  } finally {
    await t.dispose();
  }
});

test('no logind on a machine that suspends: one failing line with its fix, the dependent checks skipped', async () => {
  const t = cliEnv(); // DBUS_SYSTEM_BUS_ADDRESS points at a socket that does not exist
  try {
    await t.initVault();
    const { code, report, text } = await doctor(t, { STASH_SYS_POWER_STATE: powerState(t, 'freeze mem disk\n') });
    assert.is(code, 1);
    assert.not.ok(report.ok);
    const backend = check(report, 'inhibitor backend');
    assert.is(backend.status, 'fail');
    assert.match(
      backend.detail,
      /^logind via libsystemd\.so\.0 unavailable: cannot connect to the system bus at unix:path=.*no-bus: No such file or directory/,
    );
    assert.match(backend.fix!, /systemd-logind \(or elogind\)/);
    for (const name of ['delay lock', 'block lock', 'suspend listener']) {
      assert.is(check(report, name).status, 'info', name);
      assert.is(check(report, name).detail, 'skipped: logind is unavailable (see inhibitor backend)');
      assert.is(check(report, name).fix, undefined);
    }
    assert.equal(
      report.checks.filter((c) => c.status === 'fail').map((c) => c.name),
      ['inhibitor backend'],
      'one cause, one failing line',
    );
    assert.match(
      text,
      /\[FAIL\] inhibitor backend: logind via libsystemd\.so\.0 unavailable: cannot connect to the system bus/,
    );
    assert.match(text, /\n {7}fix: suspend protection needs systemd-logind/);
    assert.match(
      backend.fix!,
      /or, to run without suspend protection .*set agent\.prevent_sleep = false in the config file, which makes this a warning$/,
    );
    // With no agent and no socket folder, doctor starts one: the folder is reported as it is
    // afterwards, one story with "agent running" (it said "not created yet" beside the running agent).
    await t.stopAgents();
    rmSync(t.dir, { recursive: true, force: true });
    const fresh = await t.run(['doctor', '--json'], {
      env: { STASH_SYS_POWER_STATE: powerState(t, 'freeze mem disk\n') },
    });
    const started = JSON.parse(fresh.stdout) as Report;
    assert.match(check(started, 'agent running').detail, /\(started by doctor\)/);
    assert.match(check(started, 'socket folder').detail, /: mode 0700$/);
    assert.not.match(fresh.stdout, /not created yet/);
    assert.match(text, /\[info\] delay lock: skipped: logind is unavailable/);
    assert.match(text, /\n1 problem found: inhibitor backend\.\n$/);
  } finally {
    await t.dispose();
  }
});

test('no logind with agent.prevent_sleep = false: a warning, doctor passes', async () => {
  const t = cliEnv();
  try {
    mkdirSync(join(t.home, 'config', 'stash'), { recursive: true });
    writeFileSync(join(t.home, 'config', 'stash', 'config.toml'), '[agent]\nprevent_sleep = false\n');
    await t.initVault(); // starts the agent with that setting
    const { code, report, text } = await doctor(t, { STASH_SYS_POWER_STATE: powerState(t, 'mem\n') });
    assert.is(code, 0, text);
    const backend = check(report, 'inhibitor backend');
    assert.is(backend.status, 'warn');
    assert.match(backend.detail, /agent\.prevent_sleep is off: keys are wiped only by their TTL\)$/);
    assert.equal(
      report.checks.filter((c) => c.status === 'fail'),
      [],
    );
  } finally {
    await t.dispose();
  }
});

test('a machine that cannot suspend: suspend protection is [info] not needed; a test-cost vault is [warn]; doctor passes', async () => {
  const t = cliEnv();
  try {
    await t.initVault();
    for (const state of [powerState(t, ''), join(t.home, 'no-such-power-state')]) {
      const { code, report, text } = await doctor(t, { STASH_SYS_POWER_STATE: state });
      assert.is(code, 0, text);
      const suspend = report.checks.filter((c) => c.section === 'suspend');
      assert.is(suspend.length, 1, JSON.stringify(suspend));
      assert.is(suspend[0]!.name, 'suspend protection');
      assert.is(suspend[0]!.status, 'info');
      assert.match(
        suspend[0]!.detail,
        /^not needed: this machine cannot suspend \(.*power-state (lists no sleep state|does not exist)\)/,
      );
      assert.match(text, /\[info\] suspend protection: not needed: this machine cannot suspend/);
      const vault = check(report, 'vault');
      assert.is(vault.status, 'warn');
      assert.match(
        vault.detail,
        /Argon2id 1 pass\(es\) \/ 8 KiB, .*; this is the minimum cost made for test suites \(STASH_KDF=test\)/,
      );
      assert.is(vault.fix, 'raise the cost when you next change the password: stash vault passwd --kdf moderate');
      // The other warning: no lock source (no logind, no session bus here), test/cli/session-lock.test.ts.
      assert.is(check(report, 'screen lock wipe').status, 'warn');
      assert.match(text, /\nNo problems found \(2 warnings\)\.\n$/);
    }
  } finally {
    await t.dispose();
  }
});

test('socket folder 0755: the agent is refused, doctor names the folder and the fix', async () => {
  const t = cliEnv();
  try {
    await t.initVault(['work']);
    await t.stopAgents();
    mkdirSync(t.dir, { recursive: true });
    chmodSync(t.dir, 0o755);
    const { code, report, text } = await doctor(t);
    assert.is(code, 1);
    const folder = check(report, 'socket folder');
    assert.is(folder.status, 'fail');
    assert.is(folder.detail, `${t.dir} (STASH_SESSION_AGENT_DIR): ${t.dir} has mode 0755; it must be 0700`);
    assert.is(folder.fix, `check the contents of ${t.dir}, then: chmod 700 ${t.dir}`);
    const agent = check(report, 'agent running');
    assert.is(agent.status, 'fail');
    assert.match(agent.detail, /unsafe agent socket folder/);
    assert.is(agent.fix, `check the contents of ${t.dir}, then: chmod 700 ${t.dir}`);
    assert.match(
      text,
      /\[FAIL\] socket folder: .* has mode 0755; it must be 0700\n {7}fix: check the contents of .*, then: chmod 700 /,
    );
    assert.equal(agentPids(t.dir), [], 'no agent was started in the unsafe folder');
    // Ordinary commands still work, without caching, after one warning.
    const get = await t.run(['container', 'create', 'other', '--password-file', t.pwFile]);
    assert.is(get.code, 0, get.stderr);
    assert.match(
      get.stderr,
      /^stash: warning: the session agent is unavailable \(unsafe agent socket folder: .* has mode 0755; it must be 0700\. Check its contents, then fix it with: chmod 700 .*\); continuing without caching keys\n$/,
    );
    chmodSync(t.dir, 0o700);
  } finally {
    await t.dispose();
  }
});

test('fallback folder squatted by another user (/tmp/stash-UID as their symlink or folder): refused, and the advice is to move, not chmod', async () => {
  if (typeof process.getuid !== 'function' || process.getuid() !== 0) {
    console.log('SKIP: squatting needs a second uid: chown as root (not root here)');
    return;
  }
  const t = cliEnv({ STASH_SESSION_AGENT_DIR: undefined, XDG_RUNTIME_DIR: undefined });
  try {
    // The fallback is <tmpdir>/stash-<uid>; TMPDIR moves tmpdir() into this test's own folder.
    const tmp = join(t.home, 'tmp');
    mkdirSync(tmp, { mode: 0o1777 });
    chmodSync(tmp, 0o1777);
    const env = { TMPDIR: tmp };
    await t.initVault(['work']);
    const fallback = join(tmp, `stash-${process.getuid!()}`);
    const victimTarget = join(tmp, 'attacker-owned');
    for (const squat of ['symlink', 'folder'] as const) {
      if (squat === 'symlink') {
        mkdirSync(victimTarget, { mode: 0o700 });
        chownSync(victimTarget, 65534, 65534);
        symlinkSync(victimTarget, fallback);
        lchownSync(fallback, 65534, 65534);
      } else {
        mkdirSync(fallback, { mode: 0o700 });
        chownSync(fallback, 65534, 65534);
      }
      const list = await t.run(['container', 'create', `other-${squat}`, '--password-file', t.pwFile], { env });
      assert.is(list.code, 0, list.stderr);
      assert.match(list.stderr, /unsafe agent socket folder: .* is owned by uid 65534, not by you/);
      assert.match(list.stderr, /set XDG_RUNTIME_DIR .* or STASH_SESSION_AGENT_DIR to a folder only you can enter/);
      assert.not.match(list.stderr, /chmod/, 'chmod cannot help the victim');
      const { report, text } = await doctor(t, env);
      const folder = check(report, 'socket folder');
      assert.is(folder.status, 'fail');
      assert.match(folder.fix ?? '', /^you cannot repair a folder another user controls .*set XDG_RUNTIME_DIR/);
      assert.not.match(text, /chmod 700/);
      assert.equal(
        readdirSync(squat === 'symlink' ? victimTarget : fallback),
        [],
        'nothing was created in the squatted folder',
      );
      rmSync(fallback, { recursive: true, force: true });
    }
  } finally {
    await t.dispose();
  }
});

test('config settings show their source; a broken config file fails with the file named', async () => {
  const t = cliEnv({ STASH_AGENT_PREVENT_SLEEP: '0' });
  try {
    await t.initVault();
    const cfgDir = join(t.home, 'config', 'stash');
    mkdirSync(cfgDir, { recursive: true });
    writeFileSync(join(cfgDir, 'config.toml'), '[agent]\nterminate_on_suspend = false\n[cli]\nclip_seconds = 20\n');
    const good = await doctor(t);
    const s = good.report.config!.settings;
    assert.equal(s['agent.prevent_sleep'], { value: false, source: 'environment', from: 'STASH_AGENT_PREVENT_SLEEP' });
    assert.equal(s['agent.terminate_on_suspend'], { value: false, source: 'file', from: 'agent.terminate_on_suspend' });
    assert.equal(s.key_server_url, { value: null, source: 'default', from: null });
    assert.equal(s['cli.clip_seconds'], { value: 20, source: 'file', from: 'cli.clip_seconds' });
    assert.match(good.text, /\[info\] cli\.clip_seconds: 20 \(file: cli\.clip_seconds\)/);
    assert.match(good.text, /\[info\] agent\.prevent_sleep: false \(environment: STASH_AGENT_PREVENT_SLEEP\)/);
    assert.match(good.text, /\[info\] agent\.terminate_on_suspend: false \(file: agent\.terminate_on_suspend\)/);
    assert.match(check(good.report, 'config file').detail, /config\.toml \(default location; found\)$/);
    await t.stopAgents();

    writeFileSync(join(cfgDir, 'config.toml'), '[agent]\nprevent_sleep = "yes"\n');
    const bad = await doctor(t);
    assert.is(bad.code, 1);
    const cfg = check(bad.report, 'config file');
    assert.is(cfg.status, 'fail');
    assert.match(cfg.detail, /config\.toml:2: agent\.prevent_sleep must be a boolean \(true or false\), got "yes"$/);
    assert.match(cfg.fix ?? '', /^correct .*config\.toml \(see docs\/configuration\.md\)$/);
    // The agent refuses an invalid config too; doctor says why rather than a second failure for one cause.
    const agent = check(bad.report, 'agent running');
    assert.is(agent.status, 'info');
    assert.match(
      agent.detail,
      /^skipped: the agent cannot start with an invalid configuration \(.*config\.toml:2: agent\.prevent_sleep must be a boolean/,
    );
    assert.match(bad.text, /\[FAIL\] config file: .*config\.toml:2: agent\.prevent_sleep/);

    // An environment value: doctor names the variable.
    writeFileSync(join(cfgDir, 'config.toml'), '');
    const env = await doctor(t, { STASH_AGENT_IDLE_SECONDS: 'abc' });
    const envCheck = check(env.report, 'config file');
    assert.is(envCheck.status, 'fail');
    assert.is(envCheck.detail, 'STASH_AGENT_IDLE_SECONDS must be a positive number of seconds, got "abc"');
    assert.match(envCheck.fix ?? '', /^set STASH_AGENT_IDLE_SECONDS to a valid value or unset it/);
  } finally {
    await t.dispose();
  }
});

test('vault files readable by others and a missing vault are reported', async () => {
  const t = cliEnv();
  try {
    const none = await doctor(t);
    const vault = check(none.report, 'vault');
    assert.is(vault.status, 'warn');
    assert.match(vault.detail, /^no vault at .*\(STASH_VAULT_DIR\)$/);
    assert.is(vault.fix, 'create one: stash vault init');
    await t.initVault(['work']);
    chmodSync(join(t.vault, 'vault.json'), 0o644);
    chmodSync(join(t.vault, 'containers'), 0o755);
    // The records of shared containers (shared/<name>.json) are held to the same modes.
    mkdirSync(join(t.vault, 'shared'), { mode: 0o755 });
    chmodSync(join(t.vault, 'shared'), 0o755);
    writeFileSync(join(t.vault, 'shared', 'team.json'), '{}', { mode: 0o644 });
    const open = await doctor(t);
    const perms = check(open.report, 'vault permissions');
    assert.is(perms.status, 'fail');
    assert.ok(perms.detail.includes(`${join(t.vault, 'vault.json')} is 0644 (want 0600)`), perms.detail);
    assert.ok(perms.detail.includes(`${join(t.vault, 'containers')} is 0755 (want 0700)`));
    assert.ok(perms.detail.includes(`${join(t.vault, 'shared')} is 0755 (want 0700)`), perms.detail);
    assert.ok(perms.detail.includes(`${join(t.vault, 'shared', 'team.json')} is 0644 (want 0600)`), perms.detail);
    assert.is(perms.fix, `chmod -R go-rwx ${t.vault}`);
  } finally {
    await t.dispose();
  }
});

test.run();
