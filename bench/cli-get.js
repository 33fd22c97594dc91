// `stash get` with a cached key (the agent holds the vault and container
// keys) and `stash vault sessions`, wall time beside `node -e 0` (and beside
// the same get through node:net, the transport before the blocking one), in
// interleaved rounds (BENCH_ROUNDS, default 5): each round times every
// command back to back, so a load spike of other processes hits one round
// of all of them, not all rounds of one. hyperfine -N when installed, else
// a loop of its own that alternates the commands run by run.
// Target: the ratio of the medians <= 1.3 x `node -e 0`, and in every round.
//   node bench/cli-get.js                (BENCH_QUICK=1 for a tiny run)
import { spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { agentHome } from './agent-lib.js';
import { bin, conditions, fmt, hasCommand, quick, recordTarget, report, root } from './lib.js';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? (quick ? 1 : 5));
const RUNS = quick ? 3 : 10;
const TARGET = 1.3;
const h = agentHome({ STASH_KDF: 'test' });
const stash = [process.execPath, bin('stash.js')];

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

/** One round: RUNS wall times (ms) per command, by hyperfine -N or by alternating spawnSync runs. */
function timeRound(commands, useHyperfine) {
  if (useHyperfine) {
    const out = join(h.home, 'hyperfine.json');
    const r = spawnSync(
      'hyperfine',
      ['-N', '--warmup', '2', '--runs', String(RUNS), '--export-json', out, ...commands.map((c) => c.line)],
      {
        cwd: root,
        env: h.env,
        encoding: 'utf8',
      },
    );
    if (r.status !== 0) throw new Error(`hyperfine failed: ${r.stderr}`);
    return JSON.parse(readFileSync(out, 'utf8')).results.map((x) => x.times.map((t) => t * 1000));
  }
  const times = commands.map(() => []);
  for (let i = 0; i < RUNS + 1; i++) {
    commands.forEach((c, j) => {
      const t0 = performance.now();
      const r = spawnSync(c.argv[0], c.argv.slice(1), { cwd: root, env: { ...h.env, ...c.env }, stdio: 'ignore' });
      if (r.status !== 0) throw new Error(`${c.line} failed`);
      if (i > 0) times[j].push(performance.now() - t0);
    });
  }
  return times;
}

try {
  const pw = join(h.home, 'password');
  writeFileSync(pw, 'bench password\n', { mode: 0o600 });
  h.stash(['vault', 'init', '--password-file', pw]);
  h.stash(['container', 'create', 'work', '--password-file', pw]);
  h.stash(['set', 'work', 'API_TOKEN', '--password-file', pw], 'not-a-real-token\n');
  // No password source from here on: a get that works uses the cached keys.
  if (h.stash(['get', 'work', 'API_TOKEN']) !== 'not-a-real-token')
    throw new Error('stash get did not print the stored value');
  const quote = (s) => (/\s/.test(s) ? `'${s}'` : s);
  const commands = [
    { argv: [...stash, 'get', 'work', 'API_TOKEN'], name: 'stash get work API_TOKEN (cached key)' },
    { argv: [process.execPath, '-e', '0'], name: 'node -e 0' },
    // `env` adds an exec of its own (about 1 ms): compare this row with the first only roughly.
    {
      argv: ['env', 'STASH_CODE_CACHE=off', ...stash, 'get', 'work', 'API_TOKEN'],
      name: 'stash get, no code cache (env STASH_CODE_CACHE=off)',
    },
    // The agent reached through node:net, as before the blocking transport, beside the default
    // behind the same exec of `env`: these two rows compare the transports.
    {
      argv: ['env', 'STASH_AGENT_TRANSPORT=auto', ...stash, 'get', 'work', 'API_TOKEN'],
      name: 'stash get, blocking transport (env STASH_AGENT_TRANSPORT=auto)',
    },
    {
      argv: ['env', 'STASH_AGENT_TRANSPORT=net', ...stash, 'get', 'work', 'API_TOKEN'],
      name: 'stash get through node:net (env STASH_AGENT_TRANSPORT=net)',
    },
    { argv: [...stash, 'vault', 'sessions'], name: 'stash vault sessions (no target)' },
  ].map((c) => ({ ...c, line: c.argv.map(quote).join(' ') }));
  const useHyperfine = hasCommand('hyperfine');
  const all = commands.map(() => []);
  const roundRatios = [];
  for (let round = 0; round < ROUNDS; round++) {
    const times = timeRound(commands, useHyperfine);
    times.forEach((t, j) => {
      all[j].push(...t);
    });
    roundRatios.push(median(times[0]) / median(times[1]));
  }
  const base = median(all[1]);
  const ratio = median(all[0]) / base;
  const row = (j) => {
    const xs = all[j];
    const mean = xs.reduce((a, b) => a + b, 0) / xs.length;
    const sd = Math.sqrt(xs.reduce((a, b) => a + (b - mean) ** 2, 0) / xs.length);
    return [
      commands[j].name,
      fmt.ms(median(xs)),
      fmt.ms(mean),
      fmt.ms(sd),
      j === 1 ? '1.00' : fmt.ratio(median(xs) / base),
    ];
  };
  report(
    '`stash get` with a cached key, and `stash vault sessions`',
    ['command', 'median ms', 'mean ms', 'stddev ms', `ratio of medians to node -e 0 (target for get <= ${TARGET})`],
    commands.map((_, j) => row(j)),
    [
      `command: \`node bench/cli-get.js\` (${useHyperfine ? 'hyperfine -N, 2 warm-up runs per command per round' : 'own loop (spawnSync), commands alternating run by run'}; ${ROUNDS} interleaved round(s) of ${RUNS} runs per command, BENCH_ROUNDS; agent autostarted by the setup commands, STASH_KDF=test for the setup only)`,
      `ratio of medians round by round: ${roundRatios.map(fmt.ratio).join(', ')}`,
      `target: stash get <= ${TARGET} x node -e 0 (ratio of medians): ${ratio <= TARGET ? 'met' : 'not met'} (${fmt.ratio(ratio)}); in every round: ${Math.max(...roundRatios) <= TARGET ? 'met' : 'not met'}`,
      `conditions: ${conditions()}`,
    ],
  );
  recordTarget({
    figure: 'stash-get',
    value: `${fmt.ratio(ratio)} (${fmt.ms(median(all[0]))} ms; rounds ${roundRatios.map(fmt.ratio).join(', ')})`,
    baseline: `node -e 0 ${fmt.ms(base)} ms`,
    target: `<= ${TARGET} every round`,
    met: Math.max(...roundRatios) <= TARGET,
    command: 'node bench/cli-get.js',
  });
} finally {
  spawnSync(stash[0], [...stash.slice(1), 'vault', 'sessions', 'stop'], { cwd: root, env: h.env, stdio: 'ignore' });
  h.remove();
}
