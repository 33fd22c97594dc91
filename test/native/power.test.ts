/**
 * The native power binding on Linux against a real dbus-daemon and the
 * dbusmock logind: probe, Inhibit fds, the PrepareForSleep watcher thread,
 * no-bus failures, process exit with a watcher running, pidfd signalling.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { closeSync, readFileSync } from 'node:fs';
import { pidfdOpen, pidfdSendSignal } from '../../src/native/proc.js';
import { powerInhibit, powerProbe, powerRelease, watchPower, type NativePowerEvent } from '../../src/native/power.js';
import { errorCode } from '../../src/errors.js';
import { logindBusFacility, startLogindBus, type LogindBus } from '../fixtures/logind-bus.js';
import { needFacility } from '../helpers/facility.js';

const facility = logindBusFacility();
let bus: LogindBus | null = null;

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

async function until(what: string, check: () => Promise<boolean> | boolean, ms = 3000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

async function rejectsWith(p: Promise<unknown>, code: string): Promise<Error> {
  try {
    await p;
  } catch (err) {
    assert.is(errorCode(err), code, (err as Error).message);
    return err as Error;
  }
  throw new Error(`expected a rejection with ${code}`);
}

test.before(async () => {
  if (process.platform !== 'linux') return;
  if (!needFacility(facility.available, 'logind stand-in', facility.reason)) return;
  bus = await startLogindBus();
  process.env.DBUS_SYSTEM_BUS_ADDRESS = bus.address;
});

test.after(async () => {
  await bus?.stop();
});

test('powerProbe finds sd-bus and the logind on the bus', async () => {
  if (!bus) return;
  const probe = await powerProbe();
  assert.is(probe.available, true);
  assert.is(probe.backend, 'logind');
  assert.match(probe.library ?? '', /^lib(systemd|elogind)\.so\.0$/);
  assert.is(probe.owner, await bus.logindOwner());
  assert.is(probe.reason, null);
});

test('powerInhibit returns a close-on-exec fd that is the lock; powerRelease drops it', async () => {
  if (!bus) return;
  const fd = await powerInhibit({ what: 'sleep', who: 'stash-native-test', why: 'testing', mode: 'delay' });
  assert.ok(Number.isInteger(fd) && fd > 2);
  const flags = /flags:\s+([0-7]+)/.exec(readFileSync(`/proc/self/fdinfo/${fd}`, 'utf8'))![1]!;
  assert.ok((parseInt(flags, 8) & 0o2000000) !== 0, `O_CLOEXEC set (flags ${flags})`);
  const mine = async () => (await bus!.listInhibitors()).filter((i) => i.who === 'stash-native-test');
  assert.equal(
    (await mine()).map((i) => [i.what, i.why, i.mode]),
    [['sleep', 'testing', 'delay']],
  );
  powerRelease(fd);
  await until('logind to drop the inhibitor', async () => (await mine()).length === 0);
});

test('arguments are checked before the native call', async () => {
  await rejectsWith(powerInhibit({ what: 'nap', who: 'x', why: 'y', mode: 'block' }), 'EINVAL');
  await rejectsWith(powerInhibit({ what: 'sleep', who: '', why: 'y', mode: 'block' }), 'EINVAL');
  await rejectsWith(powerInhibit({ what: 'sleep', who: 'x', why: 'a\0b', mode: 'block' }), 'EINVAL');
  await rejectsWith(powerInhibit({ what: 'sleep', who: 'x', why: 'y', mode: 'later' as 'block' }), 'EINVAL');
  assert.throws(() => powerRelease(-1), /handle/);
  assert.throws(() => watchPower(undefined as never), /callback/);
});

test('the watcher reports ready, PrepareForSleep from logind, and owner changes', async () => {
  if (!bus) return;
  const events: NativePowerEvent[] = [];
  const watcher = watchPower((e) => events.push(e));
  try {
    await until('ready', () => events.some((e) => e.type === 'ready'));
    const owner = await bus.logindOwner();
    assert.equal(events[0], { type: 'ready', owner });
    const before = Number(process.hrtime.bigint() / 1000n);
    await bus.emitPrepareForSleep(true);
    await bus.emitPrepareForSleep(false);
    await until('two sleep events', () => events.filter((e) => e.type === 'sleep').length === 2);
    const sleeps = events.filter((e): e is Extract<NativePowerEvent, { type: 'sleep' }> => e.type === 'sleep');
    assert.equal(
      sleeps.map((e) => [e.start, e.sender]),
      [
        [true, owner],
        [false, owner],
      ],
    );
    // The same event object as macOS and Windows (native/common/power_event.h), less their allowSleep id.
    assert.equal(
      sleeps.map((e) => Object.keys(e)),
      [
        ['type', 'start', 'sender', 'at'],
        ['type', 'start', 'sender', 'at'],
      ],
    );
    const at = sleeps[0]!.at!;
    assert.ok(
      at >= before && at <= Number(process.hrtime.bigint() / 1000n),
      'receipt time is on the process.hrtime clock',
    );
    await bus.emitPrepareForSleep(true, { fromOtherSender: true });
    await bus.stopLogind();
    await until('owner gone', () => events.some((e) => e.type === 'owner' && e.owner === null));
    await bus.startLogind();
    const newOwner = await bus.logindOwner();
    await until('new owner', () => events.some((e) => e.type === 'owner' && e.owner === newOwner));
    assert.is.not(newOwner, owner);
    assert.is(events.filter((e) => e.type === 'sleep').length, 2, 'the forged signal was not reported');
  } finally {
    watcher.stop();
    watcher.stop(); // idempotent
  }
});

test('no system bus: probe says why, the watcher reports ENOENT, Inhibit rejects', async () => {
  const saved = process.env.DBUS_SYSTEM_BUS_ADDRESS;
  process.env.DBUS_SYSTEM_BUS_ADDRESS = 'unix:path=/nonexistent/stash-native/bus';
  try {
    const probe = await powerProbe();
    assert.is(probe.available, false);
    assert.match(
      probe.reason ?? '',
      /cannot connect to the system bus at unix:path=\/nonexistent\/stash-native\/bus: No such file/,
    );
    const events: NativePowerEvent[] = [];
    const watcher = watchPower((e) => events.push(e));
    await until('the error event', () => events.length > 0);
    watcher.stop();
    assert.is(events[0]!.type, 'error');
    assert.is((events[0] as { code: string }).code, 'ENOENT');
    const err = await rejectsWith(powerInhibit({ what: 'sleep', who: 'x', why: 'y', mode: 'block' }), 'ENOENT');
    assert.match(err.message, /system bus/);
  } finally {
    process.env.DBUS_SYSTEM_BUS_ADDRESS = saved;
  }
});

test('a process with a running watcher (stopped or not) exits by itself', async () => {
  if (!bus) return;
  // Plain JS child: the addon through node-gyp-build, as the package loads it.
  for (const stop of [true, false]) {
    const script = `
      const b = require('node-gyp-build')(process.cwd());
      // Kept alive until the watcher is ready (at load 18 that took more than 300 ms), then
      // nothing but the watcher is left: the process must exit by itself.
      const keep = setTimeout(() => {}, 6000);
      const w = new b.PowerWatcher((e) => {
        if (e.type !== 'ready') return;
        console.log('ready ' + e.owner);
        ${stop ? 'w.stop();' : ''}
        clearTimeout(keep);
      });`;
    const child = spawn(process.execPath, ['-e', script], {
      env: { ...process.env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (d) => {
      out += d;
    });
    child.stderr.on('data', (d) => {
      out += d;
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), 8000);
    const [code, signal] = await once(child, 'exit');
    clearTimeout(timer);
    assert.is(signal, null, `child (stop=${stop}) had to be killed: ${out}`);
    assert.is(code, 0, out);
    assert.match(out, /^ready :1\./);
  }
});

test('pidfd signals the process it was opened for, and never a later one', async () => {
  if (process.platform !== 'linux') return;
  const child = spawn('sleep', ['30'], { stdio: 'ignore' });
  await once(child, 'spawn');
  const fd = pidfdOpen(child.pid!);
  try {
    pidfdSendSignal(fd, 'SIGTERM');
    const [, signal] = await once(child, 'exit');
    assert.is(signal, 'SIGTERM');
    // Reaped: the pid may now be anyone's, the pidfd still names the dead process.
    await sleep(20);
    try {
      pidfdSendSignal(fd, 'SIGKILL');
      assert.unreachable('signal to an exited process');
    } catch (err) {
      assert.is(errorCode(err), 'ESRCH');
    }
  } finally {
    closeSync(fd);
  }
  try {
    pidfdOpen(99_999_999);
    assert.unreachable('no such process');
  } catch (err) {
    assert.ok(['ESRCH', 'EINVAL'].includes(errorCode(err) ?? ''), String(err));
  }
  assert.throws(() => pidfdSendSignal(0, 'SIGNOPE' as NodeJS.Signals), /unknown signal/);
});

test.run();
