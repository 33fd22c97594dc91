// Agent get round trip with secure frames (dist/agent/client.js against a
// real `stash __agent`), beside a baseline timed by the same loop: ssh-agent's
// request-identities round trip on a raw socket when ssh-agent is installed,
// else a bare Unix-socket echo. Target: agent get p50 < 100 microseconds.
//   node bench/agent-get.js              (BENCH_QUICK=1 for a tiny run)
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { createConnection, createServer } from 'node:net';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { agentHome, startAgent } from './agent-lib.js';
import { conditions, dist, fmt, hasCommand, pinned, pinning, quick, report } from './lib.js';

const { runLoad } = await import(dist('keyserver/bench/load.js'));
const { wipe } = await import(dist('protocol/index.js'));
const sodium = createRequire(import.meta.url)('sodium-native');
const N = quick ? 200 : 20000;
const WARMUP = quick ? 20 : 1000;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Sequential round trips: p50, p99 (microseconds) and operations per second. */
async function timeRoundTrips(op) {
  for (let i = 0; i < WARMUP; i++) await op();
  const r = await runLoad({ total: N, concurrency: 1, run: async () => { await op(); return true; } });
  if (r.errors > 0) throw new Error(`${r.errors} failed round trips (${r.firstError})`);
  return { p50: r.histogram.percentile(50), p99: r.histogram.percentile(99), perSecond: r.requests / r.seconds };
}

/** CPU time (user + system, microseconds) of a process so far, from /proc; null where there is no /proc. */
function processCpuUs(pid) {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
    return ((Number(fields[11]) + Number(fields[12])) * 1e6) / 100; // clock ticks; USER_HZ is 100 on Linux
  } catch {
    return null;
  }
}

/** One request-reply at a time over a raw Unix socket; `expect` = reply length. */
function rawRoundTrip(path, request, expect) {
  return new Promise((resolve, reject) => {
    const sock = createConnection(path);
    let waiting = null;
    let got = 0;
    sock.on('data', (d) => {
      got += d.length;
      if (got >= expect(d) && waiting) {
        got = 0;
        const w = waiting;
        waiting = null;
        w();
      }
    });
    sock.once('error', reject);
    sock.once('connect', () => resolve({
      op: () => new Promise((ok) => { waiting = ok; sock.write(request); }),
      close: () => sock.destroy(),
    }));
  });
}

async function sshAgentBaseline(home) {
  const path = join(home, 'ssh-agent.sock');
  const argv = pinned(pinning?.server, ['ssh-agent', '-D', '-a', path]);
  const proc = spawn(argv[0], argv.slice(1), { stdio: 'ignore' });
  try {
    for (let i = 0; !existsSync(path); i++) {
      if (i > 250) throw new Error('ssh-agent did not create its socket');
      await sleep(20);
    }
    // SSH2_AGENTC_REQUEST_IDENTITIES (11); the answer (12, no keys) is 9 bytes.
    const c = await rawRoundTrip(path, Buffer.from([0, 0, 0, 1, 11]), () => 9);
    try {
      return { name: 'ssh-agent request-identities (raw socket)', ...(await timeRoundTrips(c.op)) };
    } finally {
      c.close();
    }
  } finally {
    proc.kill('SIGTERM');
  }
}

async function echoBaseline(home) {
  const path = join(home, 'echo.sock');
  const server = createServer((s) => s.pipe(s));
  await new Promise((r) => server.listen(path, r));
  const c = await rawRoundTrip(path, Buffer.alloc(64, 1), () => 64);
  try {
    return { name: 'Unix-socket echo, 64 B (no ssh-agent here)', ...(await timeRoundTrips(c.op)) };
  } finally {
    c.close();
    server.close();
  }
}

const h = agentHome();
try {
  const agent = await startAgent(h, pinning?.server);
  let ours;
  let into;
  try {
    const id = randomBytes(16);
    const key = randomBytes(32);
    await agent.client.put(id, key, { ttl: 600 });
    key.fill(0);
    const agentCpu0 = processCpuUs(agent.proc.pid);
    const clientCpu0 = process.cpuUsage();
    ours = await timeRoundTrips(async () => {
      const got = await agent.client.get(id);
      if (!got) throw new Error('cache miss');
      wipe(got.key);
    });
    const clientCpu = process.cpuUsage(clientCpu0);
    const agentCpu1 = processCpuUs(agent.proc.pid);
    ours.cpu = {
      client: (clientCpu.user + clientCpu.system) / (N + WARMUP),
      agent: agentCpu0 === null || agentCpu1 === null ? null : (agentCpu1 - agentCpu0) / (N + WARMUP),
    };
    // The same gets into one secure buffer the caller keeps (a long-lived caller's way).
    const out = sodium.sodium_malloc(64);
    try {
      const intoCpu0 = process.cpuUsage();
      into = await timeRoundTrips(async () => {
        if (!(await agent.client.getInto(id, out))) throw new Error('cache miss');
      });
      const intoCpu = process.cpuUsage(intoCpu0);
      into.cpu = { client: (intoCpu.user + intoCpu.system) / (N + WARMUP) };
    } finally {
      wipe(out);
    }
  } finally {
    await agent.stop();
  }
  const base = hasCommand('ssh-agent') ? await sshAgentBaseline(h.home) : await echoBaseline(h.home);
  report('Agent get round trip', ['round trip', 'p50 us', 'p99 us', 'per second', 'p50 ratio to baseline'], [
    ['stash agent get (sealed frames, a fresh secure buffer per key)', fmt.us(ours.p50), fmt.us(ours.p99), fmt.int(ours.perSecond), fmt.ratio(ours.p50 / base.p50)],
    ['stash agent getInto (sealed frames, the caller\'s secure buffer reused)', fmt.us(into.p50), fmt.us(into.p99), fmt.int(into.perSecond), fmt.ratio(into.p50 / base.p50)],
    [base.name, fmt.us(base.p50), fmt.us(base.p99), fmt.int(base.perSecond), '1.00'],
  ], [
    `command: \`node bench/agent-get.js\`; ${fmt.int(N)} sequential round trips each after ${WARMUP} warm-up ones, one connection, ${pinning ? `agents on CPU ${pinning.server}, client unpinned` : 'unpinned'}`,
    `CPU per get (warm-up included): client ${fmt.us(ours.cpu.client)} us (getInto: ${fmt.us(into.cpu.client)} us), agent ${ours.cpu.agent === null ? 'not measured (no /proc)' : `${fmt.us(ours.cpu.agent)} us`}`,
    `target: agent get p50 < 100 us: get ${ours.p50 < 100 ? 'met' : 'not met'} (${fmt.us(ours.p50)} us), getInto ${into.p50 < 100 ? 'met' : 'not met'} (${fmt.us(into.p50)} us)`,
    `conditions: ${conditions()}`,
  ]);
} finally {
  h.remove();
}
