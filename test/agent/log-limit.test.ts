/**
 * The agent's log under a flood: lines of one shape are rate limited and
 * counted, and a log file is rotated once past its bound (issue 15, item 8).
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { join } from 'node:path';
import { BURST, lineShape, RateLimitedLogger } from '../../src/agent/log-limit.js';
import { createLogger, type Level } from '../../src/agent/log.js';
import { encodeFrame, encodeRequest, ephemeralKeys, FrameDecoder, MsgType } from '../../src/protocol/index.js';
import { agentEnv, exited, readLog, startAgent } from '../helpers/agent.js';

function recorder(): { lines: Array<[Level, string]>; logger: { target: string; log(l: Level, m: string): void } } {
  const lines: Array<[Level, string]> = [];
  return { lines, logger: { target: 'memory', log: (l, m) => lines.push([l, m]) } };
}

test('lines of one shape: the first ten written, the rest counted in one line at the end of the window', () => {
  let now = 1_000_000;
  const { lines, logger } = recorder();
  const limited = new RateLimitedLogger(logger, { now: () => now });
  for (let i = 0; i < 10_000; i++)
    limited.log(
      'warning',
      `closing a connection from pid ${1000 + i}: bad frame magic "${randomBytes(2).toString('hex')}", expected "SBX2"`,
    );
  limited.log('info', 'agent started (pid 7)');
  assert.is(lines.length, BURST + 1, 'ten of the flood, and the line of another shape');
  now += 60_000;
  limited.log('info', 'agent started (pid 8)'); // a line after the window ends brings the count out
  const summary = lines.find(([, m]) => m.includes('repeated'));
  assert.ok(summary, JSON.stringify(lines.slice(-3)));
  assert.is(summary![0], 'warning', 'with the level of the lines it counts');
  assert.match(
    summary![1],
    /^"closing a connection from pid 10999: bad frame magic "[0-9a-f]{4}", expected "SBX2"" \.\.\. repeated 9,990 times in 60 s/,
  );
  assert.is(lines[lines.length - 1]![1], 'agent started (pid 8)');
  limited.flush();
  assert.is(lines.filter(([, m]) => m.includes('repeated')).length, 1, 'nothing more to report');
});

test('shapes: numbers, hex and quoted parts are masked; the words and the level are kept', () => {
  assert.is(lineShape('info', 'expired 3 cached key(s)'), lineShape('info', 'expired 250 cached key(s)'));
  assert.is.not(lineShape('info', 'expired 3 cached key(s)'), lineShape('warning', 'expired 3 cached key(s)'));
  assert.is(lineShape('warning', 'bad frame magic "GET "'), lineShape('warning', 'bad frame magic "\u0001\u0002"'));
  assert.is.not(
    lineShape('info', 'activity env registered for pid 5'),
    lineShape('info', 'activity open registered for pid 5'),
  );
});

test('a log file is rotated once past its bound: FILE and FILE.1, both owner-only', async () => {
  const t = agentEnv();
  try {
    const logger = await createLogger({ STASH_SESSION_AGENT_LOG: t.logPath }, { maxBytes: 4096 });
    // Distinct shapes (letters only, not masked), so the rate limit lets every line through.
    const word = (i: number): string =>
      i
        .toString(20)
        .replace(/[0-9]/g, (d) => 'ghijklmnop'[Number(d)]!)
        .replace(/[a-f]/g, (c) => 'qrstuv'['abcdef'.indexOf(c)]!);
    for (let i = 0; i < 200; i++) logger.log('info', `event ${word(i)} happened`);
    const size = statSync(t.logPath).size;
    const older = statSync(`${t.logPath}.1`).size;
    assert.ok(size > 0 && size <= 4096, `agent.log has ${size} bytes`);
    assert.ok(older > 3000 && older <= 4096, `agent.log.1 has ${older} bytes`);
    assert.ok(!existsSync(`${t.logPath}.2`), 'one rotation kept, no more');
    assert.is(statSync(t.logPath).mode & 0o777, 0o600);
    assert.is(statSync(`${t.logPath}.1`).mode & 0o777, 0o600);
    assert.match(
      readFileSync(t.logPath, 'utf8'),
      new RegExp(`event ${word(199)} happened\\n$`),
      'the newest line is in the current file',
    );
  } finally {
    t.cleanup();
  }
});

/** `p`, or a failure after `ms`: a broken agent must fail this test, not hang it. */
function within<T>(ms: number, p: Promise<T>, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms: ${what}`)), ms);
  });
  return Promise.race([p, late]).finally(() => clearTimeout(timer));
}

function openSocket(path: string): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const s = connect(path);
    s.once('connect', () => resolve(s));
    s.once('error', reject);
  });
}

test('a live agent sent 2,000 bad 9-byte frames and 20,000 forged sealed frames keeps a small log that counts them', async () => {
  const t = agentEnv();
  const proc = await startAgent(t);
  const path = join(t.dir, 'agent.sock');
  try {
    // Bad magic: each is answered, logged and its connection closed; 32 connections at a time.
    let sent = 0;
    const badFrame = async (): Promise<void> => {
      while (sent < 2000) {
        sent++;
        const s = await openSocket(path);
        await new Promise<void>((resolve) => {
          s.on('error', () => {});
          s.once('close', () => resolve());
          s.resume(); // read the ERROR reply and the end, so that the socket closes
          s.write(Buffer.from(`XXXX${randomBytes(5).toString('latin1')}`, 'latin1'));
        });
      }
    };
    await within(60_000, Promise.all(Array.from({ length: 32 }, badFrame)), '2,000 bad frames answered and closed');

    // After a handshake, sealed frames that fail authentication: each answered, logged, connection kept.
    const s = await openSocket(path);
    const decoder = new FrameDecoder();
    let replies = 0;
    const all = new Promise<void>((resolve) =>
      s.on('data', (d: Buffer) => {
        decoder.push(d);
        while (decoder.next()) if (++replies === 20_001) resolve();
      }),
    );
    const hello = encodeRequest({ type: 'hello', version: 2, publicKey: ephemeralKeys().publicKey });
    s.write(encodeFrame(hello.type, hello.payload));
    const forged = Buffer.concat([Buffer.alloc(8), randomBytes(40)]); // counter 0, random ciphertext
    s.write(Buffer.concat(Array.from({ length: 20_000 }, () => encodeFrame(MsgType.SEALED, forged))));
    await within(60_000, all, '20,000 forged sealed frames answered');
    s.destroy();
  } finally {
    proc.kill('SIGTERM');
    await exited(proc);
  }
  try {
    const log = readLog(t);
    console.log(`agent log after 22,000 bad frames: ${log.length} bytes, ${log.split('\n').length - 1} lines`);
    assert.ok(log.length < 16 * 1024, `the log holds ${log.length} bytes`);
    // Every frame is accounted for: lines written plus the counts (one per minute the flood lasted).
    const accounted = (start: string): number =>
      log.split('\n').reduce((n, line) => {
        const counted = line.match(new RegExp(`: "${start}[^\n]*" \\.\\.\\. repeated ([0-9,]+) times in \\d+ s`));
        if (counted) return n + Number(counted[1]!.replace(/,/g, ''));
        return line.includes(`: ${start}`) ? n + 1 : n;
      }, 0);
    assert.is(accounted('closing a connection from pid '), 2000);
    assert.is(accounted('rejected a sealed frame from pid '), 20_000);
    assert.match(log, /agent exiting \(SIGTERM\)/);
  } finally {
    t.cleanup();
  }
});

test.run();
