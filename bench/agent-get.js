// Agent get round trip with secure frames (dist/agent/client.js against a
// real `stash __agent`), beside a baseline timed by the same loop: ssh-agent's
// request-identities round trip on a raw socket when ssh-agent is installed,
// else a bare Unix-socket echo. Targets: get p50 < 70 us, getInto
// p50 < 50 us.
//
// Where the client runs decides most of a round trip on a virtual machine: a
// message to a process on another CPU that sleeps wakes that CPU (an
// interrupt through the hypervisor), about 60 us here, for ssh-agent as for
// stash (docs/benchmarks.md). So every figure is taken twice, with the agents
// on CPU 0 and the client (this script, re-run under taskset) on CPU 0 too,
// then on CPU 1, in interleaved rounds (BENCH_ROUNDS, default 2).
//   node bench/agent-get.js              (BENCH_QUICK=1 for a tiny run)
import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createConnection, createServer } from 'node:net';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { agentHome, startAgent } from './agent-lib.js';
import { conditions, dist, fmt, hasCommand, pinned, pinning, quick, report } from './lib.js';

const N = quick ? 200 : 20000;
const WARMUP = quick ? 20 : 1000;
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? (quick ? 1 : 2));
const TARGET_GET = 70;
const TARGET_INTO = 50;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

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
    sock.once('connect', () =>
      resolve({
        op: () =>
          new Promise((ok) => {
            waiting = ok;
            sock.write(request);
          }),
        close: () => sock.destroy(),
      }),
    );
  });
}

/** The measuring side: runs in a child pinned to one CPU and prints its figures as JSON. */
async function measure() {
  const { runLoad } = await import(dist('keyserver/bench/load.js'));
  const { wipe } = await import(dist('protocol/index.js'));
  const sodium = createRequire(import.meta.url)('sodium-native');

  /** Sequential round trips: p50, p99 (microseconds) and operations per second. */
  async function timeRoundTrips(op) {
    for (let i = 0; i < WARMUP; i++) await op();
    const r = await runLoad({
      total: N,
      concurrency: 1,
      run: async () => {
        await op();
        return true;
      },
    });
    if (r.errors > 0) throw new Error(`${r.errors} failed round trips (${r.firstError})`);
    return { p50: r.histogram.percentile(50), p99: r.histogram.percentile(99), perSecond: r.requests / r.seconds };
  }

  async function sshAgentBaseline(home) {
    const path = join(home, 'ssh-agent.sock');
    const argv = pinned(pinning?.server, ['ssh-agent', '-D', '-a', path]);
    const proc = spawn(argv[0], argv.slice(1), { stdio: 'ignore' });
    try {
      // The socket file appears at bind(), before listen(): until then a connect is refused.
      let c;
      for (let i = 0; !c; i++) {
        try {
          // SSH2_AGENTC_REQUEST_IDENTITIES (11); the answer (12, no keys) is 9 bytes.
          c = await rawRoundTrip(path, Buffer.from([0, 0, 0, 1, 11]), () => 9);
        } catch (err) {
          if (!['ENOENT', 'ECONNREFUSED'].includes(err.code) || proc.exitCode !== null || i > 250)
            throw new Error(`ssh-agent is not listening on ${path}: ${err.message}`);
          await sleep(20);
        }
      }
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
    let get;
    let into;
    try {
      const id = randomBytes(16);
      const key = randomBytes(32);
      await agent.client.put(id, key, { ttl: 600 });
      key.fill(0);
      const agentCpu0 = processCpuUs(agent.proc.pid);
      const clientCpu0 = process.cpuUsage();
      get = await timeRoundTrips(async () => {
        const got = await agent.client.get(id);
        if (!got) throw new Error('cache miss');
        wipe(got.key);
      });
      const clientCpu = process.cpuUsage(clientCpu0);
      const agentCpu1 = processCpuUs(agent.proc.pid);
      get.cpu = {
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
    process.stdout.write(`${JSON.stringify({ get, into, base })}\n`);
  } finally {
    h.remove();
  }
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

/** Runs the measuring side on `cpu` (or unpinned) and returns its figures. */
function measureOn(cpu) {
  const argv = pinned(cpu, [process.execPath, fileURLToPath(import.meta.url), '--measure']);
  const r = spawnSync(argv[0], argv.slice(1), { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
  if (r.status !== 0) throw new Error(`the measuring run failed (${r.status})`);
  return JSON.parse(r.stdout.trim().split('\n').pop());
}

if (process.argv.includes('--measure')) {
  await measure();
} else {
  // Client on the agents' CPU, then on the other one, alternating round by round.
  const placements = pinning
    ? [
        { cpu: pinning.server, name: `client on CPU ${pinning.server} with the agents` },
        { cpu: pinning.load, name: `client on CPU ${pinning.load}, agents on CPU ${pinning.server}` },
      ]
    : [{ cpu: undefined, name: 'unpinned' }];
  const runs = placements.map(() => []);
  for (let round = 0; round < ROUNDS; round++)
    placements.forEach((p, j) => {
      runs[j].push(measureOn(p.cpu));
    });
  const rows = [];
  const verdicts = [];
  placements.forEach((p, j) => {
    const rs = runs[j];
    const pick = (f) => median(rs.map(f));
    const fig = (k) => ({
      p50: pick((r) => r[k].p50),
      p99: pick((r) => r[k].p99),
      perSecond: pick((r) => r[k].perSecond),
    });
    const get = fig('get');
    const into = fig('into');
    const base = fig('base');
    rows.push(
      [
        `${p.name}: stash agent get (sealed frames, the key in a slot of the client's secure key pool)`,
        fmt.us(get.p50),
        fmt.us(get.p99),
        fmt.int(get.perSecond),
        fmt.ratio(get.p50 / base.p50),
      ],
      [
        `${p.name}: stash agent getInto (sealed frames, the caller's secure buffer reused)`,
        fmt.us(into.p50),
        fmt.us(into.p99),
        fmt.int(into.perSecond),
        fmt.ratio(into.p50 / base.p50),
      ],
      [`${p.name}: ${rs[0].base.name}`, fmt.us(base.p50), fmt.us(base.p99), fmt.int(base.perSecond), '1.00'],
    );
    const cpu = `CPU per get (warm-up included, median of rounds): client ${fmt.us(pick((r) => r.get.cpu.client))} us (getInto: ${fmt.us(pick((r) => r.into.cpu.client))} us), agent ${rs[0].get.cpu.agent === null ? 'not measured (no /proc)' : `${fmt.us(pick((r) => r.get.cpu.agent))} us`}`;
    verdicts.push(
      `${p.name}: p50 round by round: get ${rs.map((r) => fmt.us(r.get.p50)).join(', ')}; getInto ${rs.map((r) => fmt.us(r.into.p50)).join(', ')}; baseline ${rs.map((r) => fmt.us(r.base.p50)).join(', ')}. ${cpu}`,
      `${p.name}: target get p50 < ${TARGET_GET} us: ${get.p50 < TARGET_GET ? 'met' : 'not met'} (${fmt.us(get.p50)} us); getInto p50 < ${TARGET_INTO} us: ${into.p50 < TARGET_INTO ? 'met' : 'not met'} (${fmt.us(into.p50)} us)`,
    );
  });
  report('Agent get round trip', ['round trip', 'p50 us', 'p99 us', 'per second', 'p50 ratio to baseline'], rows, [
    `command: \`node bench/agent-get.js\`; ${fmt.int(N)} sequential round trips each after ${WARMUP} warm-up ones, one connection; ${ROUNDS} interleaved round(s) per placement (BENCH_ROUNDS), figures are medians of the rounds`,
    ...verdicts,
    `conditions: ${conditions()}`,
  ]);
}
