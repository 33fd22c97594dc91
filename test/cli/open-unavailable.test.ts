/**
 * `stash open` exists to put a key in the agent: when no agent can be reached,
 * or the agent does not keep the key, it must fail (69) and say that nothing
 * was cached, not print "Opened" (issue 15, item 10).
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { writeFileSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { join } from 'node:path';
import { MAX_CONNECTIONS } from '../../src/agent/limits.js';
import { encodeFrame, FrameDecoder, MsgType } from '../../src/protocol/index.js';
import { cliEnv, type CliEnv } from './harness.js';

async function vaultWithEntry(t: CliEnv): Promise<void> {
  await t.initVault(['work']);
  const set = await t.run(['set', 'work', 'TOKEN', '--password-file', t.pwFile], { input: 'tok\n' });
  assert.is(set.code, 0, set.stderr);
}

/** A connection that has been answered once, so the agent surely counts it. */
function heldConnection(path: string): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const s = connect(path);
    const decoder = new FrameDecoder();
    s.once('error', reject);
    s.on('data', (d: Buffer) => {
      decoder.push(d);
      if (decoder.next()) resolve(s);
    });
    s.once('connect', () => s.write(encodeFrame(MsgType.STATUS)));
  });
}

test('no agent can be started: open exits 69 and says nothing was cached', async () => {
  const t = cliEnv();
  try {
    await vaultWithEntry(t);
    await t.stopAgents();
    // Stand-in for an agent that cannot run (a broken addon, say): it exits before listening.
    const die = join(t.home, 'die.cjs');
    writeFileSync(die, "if (process.argv.includes('__agent')) process.exit(3);\n");
    const r = await t.run(['open', 'work', '--password-file', t.pwFile], { env: { NODE_OPTIONS: `--require ${die}` } });
    assert.is(r.code, 69, r.stderr);
    assert.match(r.stderr, /^stash: cannot open work: .*nothing was cached$/m);
    assert.is(r.stdout, '', 'no "Opened" line');
  } finally {
    await t.dispose();
  }
});

test(`the agent holds ${MAX_CONNECTIONS} connections already (refuses ours): open exits 69 and says nothing was cached`, async () => {
  const t = cliEnv();
  const held: Socket[] = [];
  try {
    await vaultWithEntry(t);
    await t.run(['vault', 'sessions', 'lock-all']);
    const path = join(t.dir, 'agent.sock');
    for (let i = 0; i < MAX_CONNECTIONS; i++) held.push(await heldConnection(path));
    const r = await t.run(['open', 'work', '--password-file', t.pwFile]);
    assert.is(r.code, 69, `exit ${r.code}; stdout ${JSON.stringify(r.stdout)}; stderr ${r.stderr}`);
    assert.match(r.stderr, /^stash: cannot open work: the session agent did not keep its key; nothing was cached$/m);
    assert.not.match(r.stdout, /Opened/);
    for (const s of held.splice(0)) s.destroy();
    // With room again, the same command opens it.
    const again = await t.run(['open', 'work', '--password-file', t.pwFile]);
    assert.is(again.code, 0, again.stderr);
    assert.match(again.stdout, /^Opened work \(1 entry\)/);
  } finally {
    for (const s of held) s.destroy();
    await t.dispose();
  }
});

test.run();
