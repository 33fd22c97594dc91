/**
 * The Linux power integration against a real dbus-daemon and python3-dbusmock's
 * logind (test/fixtures/logind-bus.ts): the locks as logind lists them, the
 * order of wipe and release on PrepareForSleep, foreign senders, a logind
 * restart, and no bus at all.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { spawn } from 'node:child_process';
import { createPowerIntegration, type PowerIntegration } from '../../src/agent/power/index.js';
import { logindBusFacility, startLogindBus, type Inhibitor, type LogindBus } from '../fixtures/logind-bus.js';
import { needFacility } from '../helpers/facility.js';

const facility = logindBusFacility();
const usable = process.platform === 'linux' && facility.available;
let bus: LogindBus | null = null;

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** Polls until `check` holds (or fails after `ms`). */
async function until(what: string, check: () => Promise<boolean> | boolean, ms = 3000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

const ours = (list: Inhibitor[], mode: string) => list.filter((i) => i.who === 'stash' && i.mode === mode);

function logs() {
  const lines: string[] = [];
  return {
    lines,
    log: (level: string, message: string) => {
      lines.push(`${level}: ${message}`);
    },
  };
}

async function started(hooks: Partial<Parameters<PowerIntegration['start']>[0]> = {}) {
  const power = createPowerIntegration();
  const { lines, log } = logs();
  await power.start({ beforeSleep: async () => {}, log, ...hooks });
  return { power, lines };
}

test.before(async () => {
  if (!needFacility(usable, 'logind stand-in', process.platform === 'linux' ? facility.reason : 'Linux only')) return;
  bus = await startLogindBus();
  process.env.DBUS_SYSTEM_BUS_ADDRESS = bus.address;
});

test.after(async () => {
  await bus?.stop();
});

test('start takes the delay lock: logind lists a "delay" inhibitor by stash', async () => {
  if (!bus) return;
  const { power } = await started();
  const list = await bus.listInhibitors();
  assert.equal(
    ours(list, 'delay').map((i) => i.what),
    ['sleep'],
  );
  const s = power.status();
  assert.is(s.backend, 'logind');
  assert.is(s.available, true);
  assert.is(s.reason, null);
  assert.is(s.listener, 'running');
  assert.equal(s.delayLock, { held: true, reason: null });
  assert.match(s.library ?? '', /^lib(systemd|elogind)\.so\.0$/);
  power.stop();
  await until('the delay lock to go after stop()', async () => ours(await bus!.listInhibitors(), 'delay').length === 0);
  assert.is(power.status().listener, 'stopped');
});

test('setActivityInhibit holds one "block" inhibitor naming the kinds, and [] drops it', async () => {
  if (!bus) return;
  const { power } = await started();
  await power.setActivityInhibit(['env']);
  let block = ours(await bus.listInhibitors(), 'block');
  assert.equal(
    block.map((i) => [i.what, i.why]),
    [['sleep', 'env']],
  );
  assert.equal(power.status().blockLock, { held: true, kinds: ['env'], reason: null });
  await power.setActivityInhibit(['open', 'env', 'open']);
  block = ours(await bus.listInhibitors(), 'block');
  assert.equal(
    block.map((i) => i.why),
    ['env,open'],
    'the old lock is dropped once the new one is held',
  );
  await power.setActivityInhibit([]);
  await until('the block lock to go', async () => ours(await bus!.listInhibitors(), 'block').length === 0);
  assert.equal(power.status().blockLock, { held: false, kinds: [], reason: null });
  assert.is(ours(await bus.listInhibitors(), 'delay').length, 1, 'the delay lock is untouched');
  assert.throws(() => power.setActivityInhibit(['Bad Kind']), /lowercase/);
  power.stop();
});

test('rapid changes converge on the last request', async () => {
  if (!bus) return;
  const { power } = await started();
  void power.setActivityInhibit(['env']);
  void power.setActivityInhibit(['vault']);
  void power.setActivityInhibit([]);
  // The last call resolves once the serialised reconciliation has run dry: nothing is left to take a lock later.
  await power.setActivityInhibit(['form']);
  assert.equal(power.status().blockLock, { held: true, kinds: ['form'], reason: null });
  // logind drops a released lock when it sees its fd close, a moment later.
  await until('one block lock for "form"', async () => {
    const block = ours(await bus!.listInhibitors(), 'block');
    return block.length === 1 && block[0]!.why === 'form';
  });
  power.stop();
  await until('all locks to go', async () => ours(await bus!.listInhibitors(), 'block').length === 0);
});

test('PrepareForSleep(true): the delay lock outlives beforeSleep, then goes; (false) brings it back', async () => {
  if (!bus) return;
  const events: string[] = [];
  let hookDone = 0;
  // The hook ends once the test has looked at logind at least once while it ran (and 300 ms have
  // passed): at load 18-30 (a whole CI run) a look, a round trip to dbusmock, took longer than 300 ms.
  let observed: () => void = () => {};
  const lookedOnce = new Promise<void>((resolve) => {
    observed = resolve;
  });
  const { power } = await started({
    beforeSleep: async () => {
      events.push('beforeSleep');
      await Promise.all([sleep(300), Promise.race([lookedOnce, sleep(20_000)])]);
      hookDone = Date.now();
      events.push('wiped');
    },
    afterResume: () => events.push('afterResume'),
  });
  await bus.emitPrepareForSleep(true);
  await until('beforeSleep to run', () => events.includes('beforeSleep'));
  assert.is(power.status().phase, 'preparing');
  assert.is(power.suspending, true);
  // While the wipe runs, logind still sees the delay lock, every time we look.
  let sawHeld = 0;
  while (!hookDone) {
    const delay = ours(await bus.listInhibitors(), 'delay');
    if (!hookDone) {
      assert.is(delay.length, 1, 'the delay lock was released before beforeSleep resolved');
      sawHeld++;
      observed();
    }
  }
  assert.ok(sawHeld >= 1, `the delay lock was observed during the wipe (${sawHeld} times)`);
  await until('the delay lock to be released', async () => ours(await bus!.listInhibitors(), 'delay').length === 0);
  const s = power.status();
  assert.is(s.phase, 'sleeping');
  assert.is(s.suspendCount, 1);
  assert.ok(s.lastSuspend !== null);
  assert.ok(s.lastSuspend!.wipeLatencyMs >= 295, `wipe latency ${s.lastSuspend!.wipeLatencyMs}`);
  assert.ok(s.lastSuspend!.releaseLatencyMs >= s.lastSuspend!.wipeLatencyMs);
  assert.ok(
    s.lastSuspend!.releaseLatencyMs < 1000,
    `release latency ${s.lastSuspend!.releaseLatencyMs} ms, far under logind's 5 s`,
  );
  assert.equal(s.delayLock, { held: false, reason: 'released for suspend' });

  await bus.emitPrepareForSleep(false);
  await until('the delay lock to come back', async () => ours(await bus!.listInhibitors(), 'delay').length === 1);
  assert.equal(events, ['beforeSleep', 'wiped', 'afterResume']);
  assert.is(power.status().phase, 'idle');
  assert.is(power.suspending, false);
  // logind lists the new lock as soon as it answers Inhibit; the agent records it when that answer
  // reaches the JS thread, a moment later on a loaded machine.
  await until('the agent to hold the delay lock again', () => power.status().delayLock.held);
  power.stop();
});

test('a quick wipe releases the delay lock within milliseconds of the signal', async () => {
  if (!bus) return;
  const { power } = await started({ beforeSleep: async () => {} });
  const figures: number[] = [];
  for (let i = 0; i < 5; i++) {
    await bus.emitPrepareForSleep(true);
    await until('the release', () => power.status().suspendCount === i + 1);
    figures.push(power.status().lastSuspend!.releaseLatencyMs);
    await bus.emitPrepareForSleep(false);
    await until('the delay lock again', () => power.status().delayLock.held);
  }
  console.log(`signal-to-release latency (ms): ${figures.map((f) => f.toFixed(2)).join(', ')}`);
  assert.ok(Math.max(...figures) < 250, `latencies ${figures.join(', ')}`);
  power.stop();
});

test('beforeSleep that rejects or hangs still lets the system sleep', async () => {
  if (!bus) return;
  const { power, lines } = await started({
    beforeSleep: async () => {
      throw new Error('boom');
    },
  });
  await bus.emitPrepareForSleep(true);
  await until('the release after a failing hook', async () => ours(await bus!.listInhibitors(), 'delay').length === 0);
  assert.ok(lines.some((l) => l.startsWith('error: beforeSleep failed: boom')));
  power.stop();

  const hanging = createPowerIntegration({ sleepTimeoutMs: 200 });
  const log = logs();
  await hanging.start({ beforeSleep: () => new Promise(() => {}), log: log.log });
  await bus.emitPrepareForSleep(false); // back to idle for the mock's view; harmless
  await until('the delay lock', () => hanging.status().delayLock.held);
  await bus.emitPrepareForSleep(true);
  await until('the release after the timeout', () => hanging.status().suspendCount === 1, 2000);
  assert.ok(hanging.status().lastSuspend!.releaseLatencyMs >= 195);
  assert.ok(log.lines.some((l) => /did not finish within 200 ms/.test(l)));
  hanging.stop();
});

test('PrepareForSleep from a connection that does not own org.freedesktop.login1 is ignored', async () => {
  if (!bus) return;
  let calls = 0;
  const { power, lines } = await started({
    beforeSleep: async () => {
      calls++;
    },
  });
  // Control: the forged signal really is on the bus (an unfiltered monitor sees it).
  const monitor = spawn('dbus-monitor', ['--address', bus.address, "type='signal',member='PrepareForSleep'"], {
    stdio: ['ignore', 'pipe', 'ignore'],
  });
  let seen = '';
  monitor.stdout.on('data', (d) => {
    seen += d;
  });
  await until('dbus-monitor to start', () => seen.includes('NameAcquired') || seen.length > 0);
  await bus.emitPrepareForSleep(true, { fromOtherSender: true });
  await until('the monitor to see the forged signal', () => /member=PrepareForSleep/.test(seen));
  // Then logind's own suspend and resume. The bus hands this process its messages in order, so once the
  // resume is handled the forged signal (if it came through at all) was handled before them: obeyed, it would
  // count as a suspend of its own, or make logind's arrive while it was still being handled.
  await bus.emitPrepareForSleep(true);
  await until('the genuine signal', () => power.status().suspendCount >= 1);
  await bus.emitPrepareForSleep(false);
  await until('the genuine resume', () => power.status().phase === 'idle');
  assert.is(calls, 1, 'beforeSleep ran for the genuine signal only');
  assert.is(power.status().suspendCount, 1);
  assert.equal(
    lines.filter((l) => /preparing to sleep|still being handled/.test(l)),
    ['info: system is preparing to sleep: wiping keys'],
  );
  monitor.kill();
  power.stop();
});

test('a logind restart: both locks are taken again from the new logind', async () => {
  if (!bus) return;
  const { power } = await started();
  await power.setActivityInhibit(['unlock']);
  await bus.stopLogind();
  await until('status to notice logind left', () => !power.status().available);
  assert.is(power.status().delayLock.held, false);
  assert.is(power.status().blockLock.held, false);
  assert.match(power.status().reason ?? '', /login1 is not on the system bus/);
  await bus.startLogind();
  // 10 s: a whole CI run at load 18 took longer than 3 s here (the new logind's start and the agent's calls).
  await until(
    'both locks at the new logind',
    async () => {
      const list = await bus!.listInhibitors();
      return ours(list, 'delay').length === 1 && ours(list, 'block').length === 1;
    },
    10_000,
  );
  assert.equal(
    ours(await bus.listInhibitors(), 'block').map((i) => i.why),
    ['unlock'],
  );
  // The agent records each lock when logind's answer reaches the JS thread, just after logind lists it.
  await until('the agent to record both locks', () => power.status().delayLock.held && power.status().blockLock.held);
  const s = power.status();
  assert.is(s.available, true);
  assert.is(s.delayLock.held, true);
  assert.equal(s.blockLock.kinds, ['unlock']);
  // The new logind's signals are obeyed.
  let slept = false;
  power.stop();
  const again = createPowerIntegration();
  await again.start({
    beforeSleep: async () => {
      slept = true;
    },
  });
  await bus.emitPrepareForSleep(true);
  await until('the new owner to be obeyed', () => slept);
  await bus.emitPrepareForSleep(false);
  again.stop();
});

test('a logind restart while asleep counts as the missed resume', async () => {
  if (!bus) return;
  let resumed = 0;
  const { power, lines } = await started({
    afterResume: () => {
      resumed++;
    },
  });
  await bus.emitPrepareForSleep(true);
  await until('the suspend to be handled', () => power.status().phase === 'sleeping');
  await bus.stopLogind();
  await bus.startLogind();
  await until('the delay lock at the new logind', () => power.status().delayLock.held);
  assert.is(power.status().phase, 'idle');
  assert.is(resumed, 1);
  assert.ok(lines.some((l) => /resume was not signalled/.test(l)));
  power.stop();
});

test('no system bus: start() does not throw, status says why, and nothing is held', async () => {
  if (!bus) return;
  const saved = process.env.DBUS_SYSTEM_BUS_ADDRESS;
  process.env.DBUS_SYSTEM_BUS_ADDRESS = 'unix:path=/nonexistent/stash-test/bus';
  try {
    const { power, lines } = await started();
    const s = power.status();
    assert.is(s.available, false);
    assert.is(s.listener, 'unavailable');
    assert.match(s.reason ?? '', /cannot connect to the system bus at unix:path=\/nonexistent\/stash-test\/bus/);
    assert.is(s.delayLock.held, false);
    await power.setActivityInhibit(['env']);
    assert.is(power.status().blockLock.held, false);
    assert.match(power.status().blockLock.reason ?? '', /system bus/);
    assert.ok(lines.some((l) => l.startsWith('warning: suspend listener stopped')));
    power.stop();
    assert.is(power.status().listener, 'stopped');
  } finally {
    process.env.DBUS_SYSTEM_BUS_ADDRESS = saved;
  }
});

test('the listener comes back by itself when the bus appears later', async () => {
  if (!bus) return;
  const saved = process.env.DBUS_SYSTEM_BUS_ADDRESS;
  process.env.DBUS_SYSTEM_BUS_ADDRESS = 'unix:path=/nonexistent/stash-test/bus';
  const power = createPowerIntegration({ retryMinMs: 50 });
  await power.start({ beforeSleep: async () => {} });
  assert.is(power.status().available, false);
  process.env.DBUS_SYSTEM_BUS_ADDRESS = saved;
  await until('the retry to reach logind', () => power.status().delayLock.held);
  assert.is(power.status().listener, 'running');
  power.stop();
});

test('an unsupported platform gets the no-op integration, which says why', async () => {
  const power = createPowerIntegration({ platform: 'aix' });
  const { lines, log } = logs();
  await power.start({ beforeSleep: async () => {}, log });
  await power.setActivityInhibit(['env']);
  const s = power.status();
  assert.is(s.backend, 'none');
  assert.is(s.available, false);
  assert.is(s.reason, 'no suspend protection on aix');
  assert.equal(s.delayLock, { held: false, reason: 'no suspend protection on aix' });
  assert.is(s.blockLock.held, false);
  assert.ok(lines.some((l) => l.includes('no suspend protection on aix')));
  power.stop();
  assert.is(power.status().listener, 'stopped');
});

test.run();
