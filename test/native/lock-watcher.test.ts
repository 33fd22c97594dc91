/**
 * The binding's LockWatcher class itself, below src/native/session-lock.ts
 * (which checks its arguments first): the head every platform shares
 * (native/common/lock_watcher.h) refuses a source this OS does not have and a
 * missing callback, stamps its events with the source, answers pump() and
 * stops idempotently. Linux only: the other platforms' watchers are compiled,
 * not run, here.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadBinding, type NativeLockEvent } from '../../src/native/binding.js';
import { errorCode } from '../../src/errors.js';

const linux = process.platform === 'linux';
const Watcher = linux ? loadBinding().LockWatcher : undefined;

function throwsWith(fn: () => unknown, code: string, message: RegExp): void {
  try {
    fn();
  } catch (err) {
    assert.is(errorCode(err), code, (err as Error).message);
    assert.match((err as Error).message, message);
    return;
  }
  throw new Error(`expected a throw with ${code}`);
}

test('a source that this OS does not have is refused with EINVAL', () => {
  if (!Watcher) return;
  for (const source of ['wts', 'distributed', '']) {
    throwsWith(
      () => new Watcher({ source, sessionId: null }, () => {}),
      'EINVAL',
      new RegExp(`^no lock source ${source} on Linux$`),
    );
  }
});

test('a watcher without a callback is refused with EINVAL', () => {
  if (!Watcher) return;
  const Untyped = Watcher as unknown as new (options: unknown, callback?: unknown) => unknown;
  throwsWith(
    () => new Untyped({ source: 'logind', sessionId: null }),
    'EINVAL',
    /^stash\.LockWatcher needs a callback$/,
  );
});

test('a bus that is not there: one error event naming the source; pump() is false; stop() twice is fine', async () => {
  if (!Watcher) return;
  const dir = mkdtempSync(join(tmpdir(), 'stash-lock-watcher-'));
  const saved = process.env.DBUS_SYSTEM_BUS_ADDRESS;
  // sd-bus reads the address when the watcher's thread opens its connection.
  process.env.DBUS_SYSTEM_BUS_ADDRESS = `unix:path=${join(dir, 'no-bus')}`;
  try {
    const events: NativeLockEvent[] = [];
    const watcher = new Watcher({ source: 'logind', sessionId: null }, (e) => events.push(e));
    const deadline = Date.now() + 5000;
    while (events.length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    assert.is(watcher.pump(), false);
    watcher.stop();
    watcher.stop();
    assert.is(events.length, 1, JSON.stringify(events));
    const event = events[0]!;
    assert.is(event.type, 'error');
    if (event.type !== 'error') return;
    assert.is(event.source, 'logind');
    assert.match(event.code, /^E[A-Z]+$/);
    assert.ok(event.message.length > 0);
  } finally {
    if (saved === undefined) delete process.env.DBUS_SYSTEM_BUS_ADDRESS;
    else process.env.DBUS_SYSTEM_BUS_ADDRESS = saved;
    rmSync(dir, { recursive: true, force: true });
  }
});

test.run();
