/**
 * 100,000 random and mutated frames against a live agent, over many
 * connections, while a normal client keeps being served correctly.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { randomBytes, randomInt } from 'node:crypto';
import { connect, type Socket } from 'node:net';
import { join } from 'node:path';
import { AgentClient } from '../../src/agent/client.js';
import { MAX_HELLOS } from '../../src/agent/limits.js';
import { agentEndpoint } from '../../src/agent/paths.js';
import {
  encodeFrame,
  encodeRequest,
  FrameDecoder,
  MsgType,
  ProtocolErrorCode,
  type Request,
} from '../../src/protocol/index.js';
import { agentEnv, exited, startAgent } from '../helpers/agent.js';

const FRAMES = Number(process.env.STASH_FUZZ_FRAMES ?? 100_000);

const seeds: Request[] = [
  { type: 'stop' }, // never sent as-is: mutated only (see below)
  { type: 'status' },
  { type: 'register', pid: 1, kind: 'env' },
  { type: 'unregister', pid: 1, token: randomBytes(16) },
  { type: 'get', id: randomBytes(16) },
  { type: 'put', id: randomBytes(16), key: randomBytes(32), path: 'p', ttl: 5 },
  { type: 'forget-all' },
  { type: 'list', offset: 0 },
  { type: 'hello', version: 2, publicKey: randomBytes(32) },
];
const seedFrames = seeds.map((r) => encodeFrame(encodeRequest(r).type, encodeRequest(r).payload));

/** One garbage frame: random bytes, or a valid frame with a few bytes flipped, cut or extended. */
function garbage(i: number): Buffer {
  const mode = i % 4;
  if (mode === 0) return randomBytes(randomInt(1, 64));
  const base = Buffer.from(seedFrames[randomInt(0, seedFrames.length)]!);
  if (mode === 1) {
    for (let k = randomInt(1, 4); k > 0; k--) base[randomInt(0, base.length)] = randomInt(0, 256);
    // a STOP that survived mutation would end the test's agent: keep stops invalid
    if (base.subarray(0, 4).toString('latin1') === 'SBX2' && base[4] === MsgType.STOP) base[4] = 0x7e;
    return base;
  }
  if (mode === 2) return base.subarray(0, randomInt(1, base.length));
  // valid header, random payload of a random type (sealed types and unknown ones included)
  const payload = randomBytes(randomInt(0, 80));
  const type = [0x03, 0x04, 0x05, 0x10, 0x20, 0x21, 0x24, 0x42, 0xff][randomInt(0, 9)]!;
  return encodeFrame(type, payload);
}

function openSocket(path: string): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const s = connect(path);
    s.once('connect', () => resolve(s));
    s.once('error', reject);
  });
}

function wellFramed(b: Buffer): boolean {
  return b.length >= 9 && b.subarray(0, 4).toString('latin1') === 'SBX2' && b.readUInt32LE(5) === b.length - 9;
}

test(`${FRAMES} random and mutated frames: no crash, a normal client served throughout`, async () => {
  const t = agentEnv();
  const proc = await startAgent(t);
  const path = join(t.dir, 'agent.sock');
  const good = await AgentClient.connect(agentEndpoint({ STASH_SESSION_AGENT_DIR: t.dir }));
  const id = randomBytes(16);
  const key = randomBytes(32);
  await good.put(id, key, { ttl: 600 });
  let sent = 0;
  let replies = 0;
  let errorReplies = 0;
  let connections = 0;
  let checks = 0;
  try {
    while (sent < FRAMES) {
      // Well-framed garbage first (the agent must answer each one and keep the
      // connection), then at most one frame that breaks the framing (the agent
      // answers it and closes this connection only).
      const batch = Array.from({ length: 250 }, (_, k) => garbage(sent + k));
      // A connection may send MAX_HELLOS HELLO frames; the next is answered and closes it: keep no more.
      let hellos = 0;
      const framed = batch.filter((b) => wellFramed(b) && (b[4] !== MsgType.HELLO || ++hellos <= MAX_HELLOS));
      const breaker = batch.find((b) => !wellFramed(b));
      sent += framed.length + (breaker ? 1 : 0);
      const s = await openSocket(path);
      connections++;
      const decoder = new FrameDecoder();
      let got = 0;
      const done = new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, 3000);
        const finish = (): void => {
          clearTimeout(timer);
          resolve();
        };
        s.on('data', (d: Buffer) => {
          decoder.push(d);
          for (let f = decoder.next(); f; f = decoder.next()) {
            got++;
            if (f.type === MsgType.ERROR) errorReplies++;
          }
          if (got >= framed.length + (breaker ? 1 : 0)) finish();
        });
        s.on('close', finish);
        s.on('error', finish);
      });
      // Half-close after the batch: a truncated breaker never gets a reply, and
      // the agent closes its side once our end arrives, so the wait is short.
      s.end(Buffer.concat([...framed, ...(breaker ? [breaker] : [])]));
      await done;
      assert.ok(got >= framed.length, `every well-framed frame was answered (${got} of ${framed.length})`);
      replies += got;
      s.destroy();
      if (connections % 5 === 0) {
        const hit = await good.get(id);
        assert.ok(hit?.key.equals(key), `normal client served after ${sent} frames`);
        checks++;
      }
    }
    const hit = await good.get(id);
    assert.ok(hit?.key.equals(key));
    assert.is(proc.exitCode, null, 'agent still running');
    assert.ok(errorReplies > sent / 2, 'most garbage was answered with ERROR replies');
    assert.ok(
      checks >= 1 && checks === Math.floor(connections / 5),
      'the normal client was checked every 5 connections',
    );
    console.log(
      `fuzz: ${sent} frames over ${connections} connections, ${replies} replies (${errorReplies} errors), ${checks} checks of the normal client`,
    );
  } finally {
    good.close();
    proc.kill('SIGTERM');
    await exited(proc);
    t.cleanup();
  }
});

test('each error path answers with its code and keeps the connection (or closes it when framing broke)', async () => {
  const t = agentEnv();
  const proc = await startAgent(t);
  const path = join(t.dir, 'agent.sock');
  async function exchange(wire: Buffer): Promise<{ code: number; closed: boolean }> {
    const s = await openSocket(path);
    let closed = false;
    s.on('close', () => {
      closed = true;
    });
    const reply = await new Promise<Buffer>((r) => {
      s.once('data', r);
      s.write(wire);
    });
    // Up to 1 s for the agent to close (a whole CI run at load 18 took longer than a fixed 50 ms).
    await new Promise<void>((r) => {
      const timer = setTimeout(r, 1000);
      s.once('close', () => {
        clearTimeout(timer);
        r();
      });
    });
    s.destroy();
    assert.is(reply[4], MsgType.ERROR);
    return { code: reply.readUInt16LE(9), closed };
  }
  try {
    assert.equal(await exchange(Buffer.from('XXXX\x05\x00\x00\x00\x00', 'latin1')), {
      code: ProtocolErrorCode.BAD_MAGIC,
      closed: true,
    });
    const big = Buffer.from('SBX2\x05\x00\x00\x00\x00', 'latin1');
    big.writeUInt32LE(200_000, 5);
    assert.equal(await exchange(big), { code: ProtocolErrorCode.INVALID_SIZE, closed: true });
    assert.equal(await exchange(encodeFrame(0x42)), { code: ProtocolErrorCode.UNSUPPORTED_TYPE, closed: false });
    assert.equal(await exchange(encodeFrame(MsgType.STATUS, Buffer.from([1]))), {
      code: ProtocolErrorCode.MALFORMED_PAYLOAD,
      closed: false,
    });
    assert.equal(
      await exchange(encodeFrame(MsgType.REGISTER_ACTIVITY, Buffer.from([1, 0, 0, 0, 3, 0x61, 0x62, 0x63]))),
      { code: ProtocolErrorCode.UNKNOWN_KIND, closed: false },
    );
    assert.equal(
      await exchange(
        encodeFrame(MsgType.UNREGISTER_ACTIVITY, Buffer.concat([Buffer.from([1, 0, 0, 0]), randomBytes(16)])),
      ),
      { code: ProtocolErrorCode.BAD_TOKEN, closed: false },
    );
    assert.equal(await exchange(encodeFrame(MsgType.SEALED, randomBytes(40))), {
      code: ProtocolErrorCode.NO_SESSION,
      closed: false,
    });
    assert.equal(await exchange(encodeFrame(MsgType.HELLO, Buffer.concat([Buffer.from([3, 0]), randomBytes(32)]))), {
      code: ProtocolErrorCode.VERSION_MISMATCH,
      closed: false,
    });
    for (const flags of [0x01, 0xff]) {
      assert.equal(
        await exchange(encodeFrame(MsgType.HELLO, Buffer.concat([Buffer.from([2, flags]), randomBytes(32)]))),
        { code: ProtocolErrorCode.UNKNOWN_FLAGS, closed: false },
        `HELLO flags ${flags}`,
      );
    }
  } finally {
    proc.kill('SIGTERM');
    await exited(proc);
    t.cleanup();
  }
});

test.run();
