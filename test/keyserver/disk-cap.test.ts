/**
 * The server bounds its own disk (--disk-cap-bytes): a real server process
 * with a 1 MB cap is made to write past it (publishes until the store is
 * full, a log line each), and server.log, its rotated files and store.log
 * stop at their shares of the cap; publishes past the store's share get 507
 * and every acknowledged one survives kill -9. The damaged copies the
 * start-up check keeps are pruned oldest first, each removal logged. And the
 * compaction threshold follows the cap, so a full store takes publishes
 * again once shares have expired.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { chmodSync, chownSync, mkdirSync, readFileSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fetchShare, publish } from '../../src/keyserver/client.js';
import { diskBudget } from '../../src/keyserver/disk/budget.js';
import { generateShareCode } from '../../src/keyserver/share-code.js';
import { ShareStore } from '../../src/keyserver/store/share-store.js';
import { startServerProcess, type ServerProcess, LIMITS_OFF } from './cluster.js';
import { ManualClock, MemoryLogger, http, identityPublicKey, mailSink, tempDir } from './harness.js';
import { asNobody, readableCopy } from '../helpers/readable-copy.js';
import { haveCommand, isRoot, needFacility } from '../helpers/facility.js';

const key = identityPublicKey();
const CAP = 1_000_000;
const budget = diskBudget(CAP);

const sizeOf = (path: string) => statSync(path, { throwIfNoEntry: false })?.size ?? 0;
const codeOf = (err: unknown) => (err as { code?: string }).code;

function startCapped(
  stateDir: string,
  logFile: string,
  sinkCommand: string,
  extra: string[] = [],
): Promise<ServerProcess> {
  return startServerProcess([
    '--bind',
    '127.0.0.1:0',
    '--state-dir',
    stateDir,
    '--disk-cap-bytes',
    String(CAP),
    '--log-file',
    logFile,
    '--verification-email-command',
    sinkCommand,
    ...LIMITS_OFF,
    ...extra,
  ]);
}

test('1 MB cap: server.log rotates, store.log stops at its share, publishes past it get 507, and every acknowledged one survives kill -9', async () => {
  const dir = tempDir('disk-cap');
  const sink = mailSink();
  const state = join(dir.path, 'state');
  const logDir = join(dir.path, 'log');
  mkdirSync(logDir);
  const logFile = join(logDir, 'server.log');
  let server = await startCapped(state, logFile, sink.command, ['--processes', '2']);
  try {
    const acked: Array<{ code: string; email: string }> = [];
    const refusals: string[] = [];
    let stop = false;
    // Each publish logs a line; the store takes about 1,400 shares of ~200 bytes before its 282,000 bytes are reached.
    const worker = async (w: number) => {
      for (let i = 0; i < 600 && !stop; i++) {
        const email = `disk${w}.${i}@example.org`;
        try {
          acked.push({ code: (await publish(server.url, key, email, { timeoutMs: 10_000 })).code, email });
        } catch (err) {
          assert.is(codeOf(err), 'STORE_FULL', (err as Error).message);
          refusals.push((err as Error).message);
          if (refusals.length >= 40) stop = true;
        }
      }
    };
    await Promise.all(Array.from({ length: 6 }, (_, w) => worker(w)));
    assert.ok(
      refusals.length >= 40,
      `publishes were refused (${acked.length} acknowledged, ${refusals.length} refused)`,
    );
    assert.match(refusals[0]!, /store is full .* nothing was stored; try again later/);
    const storeLog = join(state, 'store.log');
    const full = sizeOf(storeLog);
    assert.ok(full >= budget.publishLimitBytes && full <= budget.storeLogHardBytes, `store.log ${full} bytes`);

    // Past the cap: more publishes, all refused with 507 and Retry-After, and the store does not grow.
    for (let i = 0; i < 30; i++) {
      const r = await http(`${server.url}/v1/share`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', Accept: 'application/json' },
        body: JSON.stringify({ op: 'create', public_key: key.toString('base64'), email: `more${i}@example.org` }),
      });
      assert.is(r.status, 507, r.text);
      assert.is(r.json().error.code, 'STORE_FULL');
      assert.is(r.headers['retry-after'], '60');
    }
    assert.is(sizeOf(storeLog), full, 'a refused publish writes nothing');
    // The room above the publish limit keeps confirmations working.
    const confirmedOne = acked[acked.length - 1]!;
    const confirm = await http(`${server.url}${new URL(sink.lastLink(confirmedOne.email)).pathname}`, {
      method: 'POST',
    });
    assert.is(confirm.status, 200, confirm.text);
    const metrics = (await http(`${server.url}/metrics`)).text;
    assert.match(metrics, /\nstash_keyserver_store_full_refusals_total [1-9]\d*\n/);
    assert.match(metrics, new RegExp(`\\nstash_keyserver_disk_budget_bytes\\{part="logs"\\} ${budget.logsBytes}\\n`));

    // The logs: rotated at their share, two older files kept, nothing else.
    const logs = readdirSync(logDir).sort();
    assert.equal(logs, ['server.log', 'server.log.1', 'server.log.2']);
    for (const name of logs)
      assert.ok(sizeOf(join(logDir, name)) <= budget.logFileBytes, `${name}: ${sizeOf(join(logDir, name))} bytes`);
    assert.match(
      readFileSync(logFile, 'utf8') + readFileSync(`${logFile}.1`, 'utf8'),
      /log: rotated at \d+ bytes; older lines are in .*server\.log\.1/,
    );
    const allLogs = logs.map((n) => readFileSync(join(logDir, n), 'utf8')).join('');
    assert.not.ok(/alice|disk\d+\.\d+@example\.org/.test(allLogs), 'addresses are masked in the log');

    await server.kill();
    const onDisk = [
      ...readdirSync(state).map((n) => join(state, n)),
      ...readdirSync(logDir).map((n) => join(logDir, n)),
    ].reduce((n, p) => n + sizeOf(p), 0);
    assert.ok(onDisk <= CAP, `${onDisk} bytes on disk under a cap of ${CAP}`);

    // Every acknowledged publish is there after kill -9 (the confirmed one live, the others pending), and the store is still full.
    server = await startCapped(state, logFile, sink.command);
    for (const { code } of acked) {
      if (code === confirmedOne.code) {
        assert.is((await fetchShare(server.url, code)).code, code);
        continue;
      }
      try {
        await fetchShare(server.url, code);
        assert.unreachable(`${code} fetched while pending`);
      } catch (err) {
        assert.is(codeOf(err), 'SHARE_PENDING', `${code}: ${(err as Error).message}`);
      }
    }
    await publish(server.url, key, 'after-restart@example.org').then(
      () => assert.unreachable('a publish past the cap'),
      (err) => assert.is(codeOf(err), 'STORE_FULL'),
    );
    assert.ok(sizeOf(storeLog) <= budget.storeLogHardBytes);
  } finally {
    await server.kill();
    sink.remove();
    dir.remove();
  }
});

/** A store log of `n` pending shares in `dir`, with one bit flipped in the middle: its start-up check keeps a damaged copy. */
async function damagedLog(dir: string, n: number): Promise<void> {
  const clock = new ManualClock(Date.now());
  const store = await ShareStore.open({
    dir,
    serverId: 0,
    originEpoch: 1,
    compactMinBytes: 1 << 30,
    clock,
    logger: new MemoryLogger(),
    sweepIntervalMs: 0,
  });
  for (let i = 0; i < n; i++) {
    await store.put({
      code: generateShareCode(0, 1).canonical,
      publicKey: key,
      email: `d${i}@example.org`,
      createdAt: clock.now(),
      expiresAt: clock.now() + 900_000,
      tokenHash: createHash('sha256').update(randomBytes(32)).digest(),
    });
  }
  await store.close();
  const log = join(dir, 'store.log');
  const bytes = readFileSync(log);
  bytes[bytes.length >> 1]! ^= 0x10;
  writeFileSync(log, bytes);
}

test('damaged store copies: at most 3 and their share of the cap, oldest removed first, each removal logged; fetch processes log to the same file', async () => {
  const dir = tempDir('damaged');
  const sink = mailSink();
  const state = join(dir.path, 'state');
  mkdirSync(state);
  const logFile = join(dir.path, 'server.log');
  let server: ServerProcess | undefined;
  try {
    // Four older copies (of other incidents), then damage in today's log.
    const old = [
      '2020-01-01T00-00-00-000Z',
      '2020-02-01T00-00-00-000Z',
      '2020-03-01T00-00-00-000Z',
      '2020-04-01T00-00-00-000Z',
    ];
    await damagedLog(state, 300);
    for (const t of old) writeFileSync(join(state, `store.log.damaged-${t}`), randomBytes(60_000));
    server = await startCapped(state, logFile, sink.command, ['--processes', '2']);
    const copies = readdirSync(state)
      .filter((n) => n.startsWith('store.log.damaged-'))
      .sort();
    assert.is(copies.length, 3, copies.join(', '));
    assert.equal(
      copies.slice(0, 2),
      old.slice(2).map((t) => `store.log.damaged-${t}`),
      'the oldest went first',
    );
    assert.ok(copies[2]! > 'store.log.damaged-2021', 'the copy of this start is kept');
    assert.ok(copies.reduce((n, c) => n + sizeOf(join(state, c)), 0) <= budget.damagedBytes);
    const log = readFileSync(logFile, 'utf8');
    for (const t of old.slice(0, 2))
      assert.match(
        log,
        new RegExp(
          `WARN store: removed the damaged copy \\S*store\\.log\\.damaged-${t} \\(60000 bytes\\), oldest first`,
        ),
      );
    assert.is((log.match(/removed the damaged copy/g) ?? []).length, 2);
    await server.stop();
    // A fetch process's own lines reach the file too, through the store's process (one writer, one rotation).
    const written = readFileSync(logFile, 'utf8');
    assert.match(written, /info fetch process 1: \d+ live share\(s\) copied from the store process\n/);
    assert.match(written, /info fetch process 1: stopping: finishing the requests in flight\n/);

    // A copy larger than the whole share of the copies: removal goes on, oldest first, to the newest.
    writeFileSync(join(state, 'store.log.damaged-2099-01-01T00-00-00-000Z'), randomBytes(budget.damagedBytes + 1));
    server = await startCapped(state, logFile, sink.command);
    assert.equal(
      readdirSync(state).filter((n) => n.startsWith('store.log.damaged-')),
      [],
    );
    assert.is((readFileSync(logFile, 'utf8').match(/removed the damaged copy/g) ?? []).length, 2 + 4);
  } finally {
    await server?.kill();
    sink.remove();
    dir.remove();
  }
});

test('a server.log the server may not append to (left by systemd as root, before the server wrote its own) is rotated aside', async () => {
  if (
    !needFacility(
      isRoot && haveCommand('setpriv'),
      'a second uid',
      'needs root and setpriv (util-linux) to run the server as nobody',
    )
  )
    return;
  const dir = tempDir('log-owner');
  // As nobody, from a readable copy of the compiled package: nobody may not enter the checkout (a clone in a 0700 folder).
  const copy = readableCopy([], { dependencies: true });
  let child: ReturnType<typeof spawn> | undefined;
  try {
    chmodSync(dir.path, 0o755);
    const logDir = join(dir.path, 'log');
    const state = join(dir.path, 'state');
    for (const d of [logDir, state]) {
      mkdirSync(d);
      chownSync(d, 65534, 65534);
    }
    writeFileSync(join(logDir, 'server.log'), 'written by systemd as root\n', { mode: 0o644 });
    child = spawn(
      asNobody[0]!,
      [
        ...asNobody.slice(1),
        copy.node,
        join(copy.root, 'bin', 'stash_key_server.js'),
        'run',
        '--bind',
        '127.0.0.1:0',
        '--state-dir',
        state,
        '--log-file',
        join(logDir, 'server.log'),
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let out = '';
    let err = '';
    child.stdout!.on('data', (d) => {
      out += d;
    });
    child.stderr!.on('data', (d) => {
      err += d;
    });
    const deadline = Date.now() + 30_000;
    while (!/listening on/.test(out)) {
      if (Date.now() > deadline || child.exitCode !== null)
        throw new Error(`the server did not start as nobody: ${err}`);
      await new Promise((r) => setTimeout(r, 50));
    }
    child.kill('SIGTERM');
    await new Promise((r) => (child!.exitCode !== null ? r(null) : child!.once('exit', r)));
    assert.is(child.exitCode, 0, err);
    assert.is(readFileSync(join(logDir, 'server.log.1'), 'utf8'), 'written by systemd as root\n');
    assert.match(readFileSync(join(logDir, 'server.log'), 'utf8'), /info SIGTERM: shutting down\n/);
    assert.is(statSync(join(logDir, 'server.log')).uid, 65534);
  } finally {
    if (child && child.exitCode === null) child.kill('SIGKILL');
    copy.remove();
    dir.remove();
  }
});

test('the compaction threshold follows the cap: a full store compacts at its share, and takes publishes again once shares expire', async () => {
  const dir = tempDir('cap-compact');
  const clock = new ManualClock();
  const logger = new MemoryLogger();
  try {
    // compact_min_bytes at its default (64 MiB): under a 1 MB cap the store compacts long before that.
    const store = await ShareStore.open({
      dir: dir.path,
      serverId: 0,
      originEpoch: 1,
      compactMinBytes: 67_108_864,
      diskCapBytes: CAP,
      clock,
      logger,
      sweepIntervalMs: 0,
    });
    const share = (ttl: number) => ({
      code: generateShareCode(0, 1).canonical,
      publicKey: key,
      email: `c${randomBytes(3).toString('hex')}@example.org`,
      createdAt: clock.now(),
      expiresAt: clock.now() + ttl,
      tokenHash: createHash('sha256').update(randomBytes(32)).digest(),
    });
    let stored = 0;
    for (;;) {
      const batch = await Promise.allSettled(
        Array.from({ length: 20 }, () => store.put(share(stored < 1000 ? 60_000 : 900_000))),
      );
      stored += batch.filter((r) => r.status === 'fulfilled').length;
      const refused = batch.find((r) => r.status === 'rejected');
      if (refused) {
        assert.is(codeOf((refused as PromiseRejectedResult).reason), 'STORE_FULL');
        break;
      }
      assert.ok(stored < 5000, 'the store never filled');
    }
    assert.ok(store.compactions >= 1, `compacted under the cap (${store.compactions})\n${logger.text()}`);
    assert.ok(store.stats().storeBytes <= budget.storeLogHardBytes);
    assert.ok(store.stats().fullRefusals >= 1);
    // The first 1,000 shares expire; the sweep compacts the full store, and there is room again.
    clock.advance(61_000);
    await store.sweep();
    assert.ok(store.stats().storeBytes < budget.publishLimitBytes, `${store.stats().storeBytes} bytes after the sweep`);
    await store.put(share(900_000));
    await store.close();
  } finally {
    dir.remove();
  }
});

test.run();
