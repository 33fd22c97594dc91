/**
 * The session lock through the real CLI and the agent it starts, on the
 * logind stand-in with a login session (test/fixtures/logind-session.ts):
 * after Lock, `stash get` asks for the password again; a command that has the
 * password while the session is locked works, says once why nothing is
 * cached, and caches nothing; after Unlock the key is cached again.
 * `stash doctor` names what it watches, and warns when it watches nothing.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { logindBusFacility, startLogindBus, type LogindBus } from '../fixtures/logind-bus.js';
import { addSession } from '../fixtures/logind-session.js';
import { waitFor } from '../helpers/agent.js';
import { needFacility } from '../helpers/facility.js';
import { cliEnv, type CliEnv } from './harness.js';

const facility = logindBusFacility();
let bus: LogindBus | null = null;

test.before(async () => {
  if (
    !needFacility(
      process.platform === 'linux' && facility.available,
      'logind stand-in',
      facility.reason || 'Linux only',
    )
  )
    return;
  bus = await startLogindBus();
});

test.after(async () => {
  await bus?.stop();
});

const sessionNames = async (t: CliEnv): Promise<string[]> =>
  (
    JSON.parse((await t.run(['vault', 'sessions', '--json'])).stdout) as { sessions: Array<{ name: string }> }
  ).sessions.map((x) => x.name);

interface Check {
  section: string;
  name: string;
  status: string;
  detail: string;
  fix?: string;
}

async function doctorChecks(t: CliEnv): Promise<Check[]> {
  return (JSON.parse((await t.run(['doctor', '--json'])).stdout) as { checks: Check[] }).checks.filter(
    (c) => c.section === 'lock',
  );
}

test('Lock: stash get asks for the password again; with it, the value comes back uncached with one warning; Unlock caches again', async () => {
  if (!bus) return;
  const session = await addSession(bus, 'cli1');
  const t = cliEnv({ DBUS_SYSTEM_BUS_ADDRESS: bus.address, XDG_SESSION_ID: session.id });
  const withPassword = { env: { STASH_PASSWORD_FILE: t.pwFile } };
  try {
    await t.initVault(['work']);
    assert.is((await t.run(['set', 'work', 'TOKEN'], { ...withPassword, input: 'tok-1' })).code, 0);
    assert.is((await t.run(['get', 'work', 'TOKEN'])).stdout, 'tok-1', 'served from the agent, no password given');
    assert.equal(await sessionNames(t), ['(vault)', 'work']);
    const lock = await doctorChecks(t);
    assert.equal(
      lock.map((c) => [c.name, c.status]),
      [
        ['logind session', 'ok'],
        ['session bus screensaver', 'info'],
        ['screen lock wipe', 'ok'],
      ],
    );
    assert.is(lock[0]!.detail, `watching ${session.path}: Lock, Unlock, LockedHint`);
    assert.match(lock[2]!.detail, /^keys are wiped when the session locks \(through the logind session\)$/);

    await session.lock();
    await waitFor(async () => (await sessionNames(t)).length === 0, 5000, 'the lock wipe');
    const asked = await t.run(['get', 'work', 'TOKEN']);
    assert.is(asked.code, 64, `a password is needed again: ${asked.stderr}`);
    assert.match(asked.stderr, /a password is needed/);

    const locked = await t.run(['get', 'work', 'TOKEN'], withPassword);
    assert.is(locked.code, 0, locked.stderr);
    assert.is(locked.stdout, 'tok-1');
    assert.is(
      locked.stderr,
      'stash: warning: the session is locked, and the agent caches no key until it is unlocked; continuing without caching\n',
      'one warning that says why',
    );
    assert.equal(await sessionNames(t), [], 'nothing cached while locked');
    assert.match((await doctorChecks(t)).at(-1)!.detail, /; the session is locked now, so no key is cached$/);

    await session.unlock();
    await waitFor(
      async () => {
        const r = await t.run(['get', 'work', 'TOKEN'], withPassword);
        return r.code === 0 && r.stderr === '';
      },
      5000,
      'a get that caches again',
    );
    assert.is((await t.run(['get', 'work', 'TOKEN'])).stdout, 'tok-1', 'cached again after the unlock');
  } finally {
    await t.dispose();
  }
});

test('doctor: [warn] when no lock source is available, [info] when agent.lock_on_screen_lock is off', async () => {
  if (!bus) return;
  const t = cliEnv({ DBUS_SYSTEM_BUS_ADDRESS: bus.address }); // no XDG_SESSION_ID, no session bus
  try {
    await t.initVault();
    const lock = await doctorChecks(t);
    assert.equal(
      lock.map((c) => [c.name, c.status]),
      [
        ['logind session', 'info'],
        ['session bus screensaver', 'info'],
        ['screen lock wipe', 'warn'],
      ],
    );
    assert.match(
      lock[0]!.detail,
      /^not watched: no logind session for pid \d+ \(GetSessionByPID: .*\) and XDG_SESSION_ID is not set/,
    );
    assert.match(lock[1]!.detail, /^not watched: cannot connect to the session bus at unix:path=/);
    assert.is(lock[2]!.detail, 'no lock source is available (see above): keys stay cached while the screen is locked');
    assert.match(lock[2]!.fix!, /set agent\.lock_on_screen_lock = false$/);
    const text = (await t.run(['doctor'])).stdout;
    assert.match(
      text,
      /\nSession lock\n\[info\] logind session: not watched: .*\n\[info\] session bus screensaver: .*\n\[warn\] screen lock wipe: no lock source is available/,
    );

    await t.stopAgents();
    const off = await t.run(['doctor', '--json'], { env: { STASH_AGENT_LOCK_ON_SCREEN_LOCK: 'false' } });
    const checks = (JSON.parse(off.stdout) as { checks: Check[] }).checks;
    assert.equal(
      checks.filter((c) => c.section === 'lock'),
      [
        {
          section: 'lock',
          name: 'screen lock wipe',
          status: 'info',
          detail: 'off (agent.lock_on_screen_lock = false): keys stay cached while the session is locked',
        },
      ],
    );
    assert.equal(
      checks.find((c) => c.name === 'agent.lock_on_screen_lock'),
      {
        section: 'config',
        name: 'agent.lock_on_screen_lock',
        status: 'info',
        detail: 'false (environment: STASH_AGENT_LOCK_ON_SCREEN_LOCK)',
      },
    );
  } finally {
    await t.dispose();
  }
});

test.run();
