/**
 * The clipboard clear on suspend, end to end: `get --clip` on a real X server
 * (Xvfb + xclip), the agent started by the CLI on a private system bus with
 * python3-dbusmock's logind (test/fixtures/logind-bus.ts). The pending clear
 * takes no sleep inhibitor, and PrepareForSleep(true) clears the clipboard at
 * once, with terminate_on_suspend on and off alike.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { logindBusFacility, startLogindBus, type LogindBus } from '../fixtures/logind-bus.js';
import { startXvfb, xvfbFacility, type Xvfb } from '../fixtures/xvfb.js';
import { AgentClient } from '../../src/agent/client.js';
import { agentEndpoint } from '../../src/agent/paths.js';
import { running as alive, waitFor } from '../helpers/agent.js';
import { needFacility } from '../helpers/facility.js';
import { cliEnv } from './harness.js';

const x11 = xvfbFacility();
const logind = logindBusFacility();
let x: Xvfb | null = null;
let bus: LogindBus | null = null;

test.before(async () => {
  if (!needFacility(x11.available, 'X11 clipboard (Xvfb + xclip)', x11.reason)) return;
  if (!needFacility(process.platform === 'linux' && logind.available, 'logind stand-in', logind.reason || 'Linux only'))
    return;
  x = await startXvfb();
  bus = await startLogindBus();
});

test.after(async () => {
  await bus?.stop();
  await x?.stop();
});

for (const terminate of [false, true]) {
  test(`a suspend clears the clipboard at once (terminate_on_suspend ${terminate ? 'on' : 'off'}); the pending clear held no sleep inhibitor`, async () => {
    if (!x || !bus) return;
    await waitFor(
      async () => (await bus!.listInhibitors()).every((i) => i.who !== 'stash'),
      5000,
      "the previous agent's locks to go",
    );
    const t = cliEnv({
      DISPLAY: x.display,
      WAYLAND_DISPLAY: undefined,
      STASH_CLIPBOARD: undefined,
      DBUS_SYSTEM_BUS_ADDRESS: bus.address,
      STASH_AGENT_TERMINATE_ON_SUSPEND: terminate ? '1' : '0',
      STASH_AGENT_PREVENT_SLEEP: '1',
    });
    try {
      await t.initVault(['c']);
      assert.is((await t.run(['set', 'c', 'K', '--password-file', t.pwFile], { input: 'suspend-me' })).code, 0);
      await waitFor(
        async () => (await bus!.listInhibitors()).some((i) => i.who === 'stash' && i.mode === 'delay'),
        5000,
        "the agent's delay lock",
      );
      const r = await t.run(['get', 'c', 'K', '--clip', '--clip-seconds', '120']);
      assert.is(r.code, 0, r.stderr);
      assert.is(x.paste(), 'suspend-me');
      const pid = Number(readFileSync(join(t.dir, 'clip-clear.pid'), 'utf8').split(' ')[0]);
      // The helper registered its activity before it copied, and the agent decided on the block lock while it
      // handled that registration: its status shows the decision (a lock wanted but not taken yet shows as a
      // reason), and logind what it holds.
      const agent = await AgentClient.connect(agentEndpoint({ STASH_SESSION_AGENT_DIR: t.dir }));
      let status: Record<string, unknown>;
      try {
        status = await agent.status();
      } finally {
        agent.close();
      }
      assert.equal(status.activityKinds, ['form']);
      assert.equal((status.power as Record<string, unknown>).blockLock, { held: false, kinds: [], reason: null });
      assert.equal(
        (await bus.listInhibitors()).filter((i) => i.who === 'stash' && i.mode === 'block'),
        [],
        'no block lock for a pending clipboard clear',
      );

      const signalled = Date.now();
      await bus.emitPrepareForSleep(true);
      await waitFor(() => x!.paste() === '', 3000, 'the clipboard to be cleared by the suspend');
      const took = Date.now() - signalled;
      await waitFor(() => !alive(pid), 3000, 'the helper to exit');
      // The helper cleared it itself, inside the agent's grace before SIGKILL: the log line below says
      // "0 killed". The time is printed, not bounded: a loaded CI machine stretches it.
      console.log(`  cleared ${took} ms after the suspend signal`);
      await waitFor(
        async () => (await bus!.listInhibitors()).every((i) => !(i.who === 'stash' && i.mode === 'delay')),
        5000,
        'the delay lock released',
      );
      // The agent logs its suspend line before it releases the lock, but the log file is written
      // asynchronously: wait for the line itself, then read what it says.
      const line = terminate
        ? /activities: \d+ terminated, \d+ killed/
        : /clipboard clears: \d+ terminated, \d+ killed/;
      await waitFor(() => line.test(readFileSync(t.logPath, 'utf8')), 5000, "the agent's suspend line in its log");
      assert.match(
        readFileSync(t.logPath, 'utf8'),
        terminate ? /activities: 1 terminated, 0 killed/ : /clipboard clears: 1 terminated, 0 killed/,
      );
      await bus.emitPrepareForSleep(false);
    } finally {
      await t.dispose();
    }
  });
}

test.run();
