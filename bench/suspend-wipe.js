// Suspend wipe: time from PrepareForSleep(true) to the release of the
// agent's delay lock with 1,000 cached entries, on a private system bus
// (dbus-daemon + python3-dbusmock's logind, test/fixtures/logind-bus.ts).
// Two figures per cycle: the agent's own (signal received -> lock fd closed,
// from its status), and an outside upper bound (busctl emit returned -> the
// stand-in no longer lists the lock, polled). Target: < 50 ms.
// Then the same for the session lock: Session.Lock on the agent's own login
// session to every key wiped (the agent's own figure, `status().sessionLock`),
// and from outside: Lock called (busctl started) -> LIST empty (polled).
//   node bench/suspend-wipe.js           (BENCH_QUICK=1 for a tiny run)
import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { register } from 'tsx/esm/api';
import { agentHome, startAgent } from './agent-lib.js';
import { conditions, fmt, quick, report } from './lib.js';

register();
const { logindBusFacility, startLogindBus } = await import('../test/fixtures/logind-bus.ts');
const { addSession } = await import('../test/fixtures/logind-session.ts');

const ENTRIES = 1000;
const CYCLES = quick ? 2 : 20;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const delayLocks = async (bus) =>
  (await bus.listInhibitors()).filter((i) => i.who === 'stash' && i.mode === 'delay').length;

async function until(cond, what, timeoutMs = 10000) {
  const deadline = Date.now() + timeoutMs;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(2);
  }
}

const facility = logindBusFacility();
if (!facility.available) {
  process.stdout.write(`### Suspend wipe\n\nnot measured: ${facility.reason}\n`);
  process.exit(0);
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const bus = await startLogindBus();
const session = await addSession(bus, 'bench');
const h = agentHome({
  DBUS_SYSTEM_BUS_ADDRESS: bus.address,
  STASH_AGENT_TERMINATE_ON_SUSPEND: '0',
  XDG_SESSION_ID: session.id,
});
const inside = [];
const outside = [];
const lockInside = [];
const lockOutside = [];
let agent;
try {
  agent = await startAgent(h);
  await until(async () => (await delayLocks(bus)) === 1, "the agent's delay lock");
  for (let cycle = 0; cycle < CYCLES; cycle++) {
    const ids = Array.from({ length: ENTRIES }, () => randomBytes(16));
    for (const id of ids) await agent.client.put(id, randomBytes(32), { ttl: 600 });
    const t0 = performance.now();
    await bus.emitPrepareForSleep(true);
    await until(async () => (await delayLocks(bus)) === 0, 'the delay lock to be released');
    outside.push(performance.now() - t0);
    const power = (await agent.client.status()).power;
    inside.push(power.lastSuspend.releaseLatencyMs);
    if ((await agent.client.get(ids[0])) !== null || (await agent.client.get(ids[ENTRIES - 1])) !== null)
      throw new Error('a key survived the suspend signal');
    await bus.emitPrepareForSleep(false);
    await until(
      async () => (await delayLocks(bus)) === 1 && (await agent.client.status()).power.phase === 'idle',
      'the delay lock after resume',
    );
  }
  await until(
    async () => (await agent.client.status()).sessionLock.sources.some((s) => s.source === 'logind' && s.available),
    'the agent to watch its session',
  );
  for (let cycle = 0; cycle < CYCLES; cycle++) {
    const ids = Array.from({ length: ENTRIES }, () => randomBytes(16));
    for (const id of ids) await agent.client.put(id, randomBytes(32), { ttl: 600 });
    const t0 = performance.now();
    await session.lock();
    await until(async () => (await agent.client.list()).length === 0, 'the lock wipe');
    lockOutside.push(performance.now() - t0);
    const lock = (await agent.client.status()).sessionLock;
    if (lock.lastLock.wiped !== ENTRIES) throw new Error(`the lock wiped ${lock.lastLock.wiped} keys, not ${ENTRIES}`);
    lockInside.push(lock.lastLock.wipeLatencyMs);
    if ((await agent.client.get(ids[0])) !== null || (await agent.client.get(ids[ENTRIES - 1])) !== null)
      throw new Error('a key survived the lock');
    await session.unlock();
    await until(async () => !(await agent.client.status()).sessionLock.locked, 'the unlock');
  }
} finally {
  await agent?.stop();
  await bus.stop();
  h.remove();
}

report(
  'Suspend wipe of 1,000 cached entries',
  ['figure', 'median ms', 'max ms', 'target < 50 ms'],
  [
    [
      'agent: signal received -> delay lock released',
      fmt.ms(median(inside)),
      fmt.ms(Math.max(...inside)),
      Math.max(...inside) < 50 ? 'met' : 'not met',
    ],
    [
      'outside: emit returned -> lock gone from ListInhibitors (polled, upper bound)',
      fmt.ms(median(outside)),
      fmt.ms(Math.max(...outside)),
      median(outside) < 50 ? 'met (median)' : 'not met',
    ],
  ],
  [
    `command: \`node bench/suspend-wipe.js\`; ${CYCLES} suspend/resume cycles, ${fmt.int(ENTRIES)} entries put before each; logind stand-in: dbus-daemon + python3-dbusmock (/usr/bin/python3)`,
    'every cycle checks that the first and the last entry miss afterwards',
    `conditions: ${conditions()}`,
  ],
);
process.stdout.write('\n');
report(
  'Session lock wipe of 1,000 cached entries',
  ['figure', 'median ms', 'max ms', 'target < 50 ms'],
  [
    [
      'agent: Lock read off the bus -> every key wiped',
      fmt.ms(median(lockInside)),
      fmt.ms(Math.max(...lockInside)),
      Math.max(...lockInside) < 50 ? 'met' : 'not met',
    ],
    [
      'outside: Lock called (busctl started) -> LIST empty (polled, upper bound)',
      fmt.ms(median(lockOutside)),
      fmt.ms(Math.max(...lockOutside)),
      median(lockOutside) < 50 ? 'met (median)' : 'not met',
    ],
  ],
  [
    `command: \`node bench/suspend-wipe.js\`; ${CYCLES} lock/unlock cycles (Session.Lock / Session.Unlock of the stand-in on the agent's own session, XDG_SESSION_ID), ${fmt.int(ENTRIES)} entries put before each`,
    'every cycle checks that the agent reports all entries wiped and that the first and the last entry miss afterwards',
    `conditions: ${conditions()}`,
  ],
);
