/**
 * A real server process is killed with SIGKILL in the middle of a stream of
 * publishes; after a restart on the same state folder every publish that was
 * acknowledged (201) must still be there. Then the log's tail is torn by hand:
 * the good prefix survives and the damaged file is set aside.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type { ChildProcess } from 'node:child_process';
import { appendFileSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fetchShare, publish } from '../../src/keyserver/client.js';
import { identityPublicKey, tempDir } from './harness.js';
import { startServerProcess, type ServerProcess, LIMITS_OFF } from './cluster.js';

const key = identityPublicKey();

/** A real server process on a free loopback port with `stateDir` and no limits in the way. */
function startProcess(stateDir: string): Promise<ServerProcess> {
  return startServerProcess(['--bind', '127.0.0.1:0', '--state-dir', stateDir, ...LIMITS_OFF]);
}

function waitExit(child: ChildProcess): Promise<void> {
  return new Promise((r) =>
    child.exitCode !== null || child.signalCode !== null ? r() : child.once('exit', () => r()),
  );
}

test('kill -9 during a stream of publishes: every acknowledged share survives the restart', async () => {
  const dir = tempDir('crash');
  try {
    const first = await startProcess(dir.path);
    const acked: string[] = [];
    let failures = 0;
    let stop = false;
    const worker = async (w: number) => {
      for (let i = 0; !stop; i++) {
        try {
          const p = await publish(first.url, key, `w${w}.n${i}@example.org`, { timeoutMs: 5000 });
          acked.push(p.code);
        } catch {
          failures++;
          return; // the server is gone
        }
      }
    };
    const workers = Array.from({ length: 8 }, (_, w) => worker(w));
    while (acked.length < 150) await new Promise((r) => setTimeout(r, 10));
    first.child.kill('SIGKILL');
    await waitExit(first.child);
    stop = true;
    await Promise.all(workers);
    assert.is(first.child.signalCode, 'SIGKILL');
    assert.ok(failures > 0, 'publishes were in flight when the server died');

    const second = await startProcess(dir.path);
    try {
      for (const code of acked) {
        try {
          await fetchShare(second.url, code);
          assert.unreachable('unverified share fetched');
        } catch (err) {
          assert.is((err as { code?: string }).code, 'SHARE_PENDING', `${code}: ${(err as Error).message}`);
        }
      }
      assert.match(second.stderr(), /store: \d+ record\(s\) read/);
    } finally {
      second.child.kill('SIGTERM');
      await waitExit(second.child);
    }
    assert.is(second.child.exitCode, 0, `clean shutdown on SIGTERM: ${second.stderr()}`);

    // A torn tail (half a record written when the power went) on top.
    const log = join(dir.path, 'store.log');
    const sizeBefore = statSync(log).size;
    appendFileSync(log, Buffer.from([0, 0, 0, 200, 1, 2, 3]));
    const third = await startProcess(dir.path);
    try {
      for (const code of acked.slice(-20)) {
        try {
          await fetchShare(third.url, code);
        } catch (err) {
          assert.is((err as { code?: string }).code, 'SHARE_PENDING');
        }
      }
      assert.match(third.stderr(), /torn record at the end .* saved the damaged file as/);
      assert.ok(readdirSync(dir.path).some((n) => n.startsWith('store.log.damaged-')));
      assert.is(statSync(log).size, sizeBefore, 'cut back to the good prefix');
    } finally {
      third.child.kill('SIGTERM');
      await waitExit(third.child);
    }
  } finally {
    dir.remove();
  }
});

test.run();
