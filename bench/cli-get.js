// `stash get` with a cached key (the agent holds the vault and container
// keys) and `stash vault sessions`, wall time beside `node -e 0`. Uses hyperfine when installed, else a
// timing loop of its own. Target: < 2 x the wall time of `node -e 0`.
//   node bench/cli-get.js                (BENCH_QUICK=1 for a tiny run)
import { spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { agentHome } from './agent-lib.js';
import { bin, conditions, fmt, hasCommand, quick, report, root } from './lib.js';

const RUNS = quick ? 3 : 30;
const h = agentHome({ STASH_KDF: 'test' });
const stash = [process.execPath, bin('stash.js')];

function stashRun(args, input) {
  const r = spawnSync(stash[0], [...stash.slice(1), ...args], { cwd: root, env: h.env, input, encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`stash ${args.join(' ')} failed (${r.status}): ${r.stderr}`);
  return r.stdout;
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

/** Mean, median and standard deviation of wall times in ms, per command line. */
function timeCommands(commands) {
  if (hasCommand('hyperfine')) {
    const out = join(h.home, 'hyperfine.json');
    const r = spawnSync('hyperfine', ['-N', '--warmup', quick ? '1' : '3', '--runs', String(RUNS), '--export-json', out, ...commands.map((c) => c.line)], {
      cwd: root, env: h.env, encoding: 'utf8',
    });
    if (r.status !== 0) throw new Error(`hyperfine failed: ${r.stderr}`);
    const results = JSON.parse(readFileSync(out, 'utf8')).results;
    return { tool: 'hyperfine -N', rows: results.map((x) => ({ mean: x.mean * 1000, median: x.median * 1000, stddev: (x.stddev ?? 0) * 1000 })) };
  }
  const rows = commands.map((c) => {
    const times = [];
    for (let i = 0; i < RUNS + 1; i++) {
      const t0 = performance.now();
      const r = spawnSync(c.argv[0], c.argv.slice(1), { cwd: root, env: h.env, stdio: 'ignore' });
      if (r.status !== 0) throw new Error(`${c.line} failed`);
      if (i > 0) times.push(performance.now() - t0);
    }
    const mean = times.reduce((a, b) => a + b, 0) / times.length;
    return { mean, median: median(times), stddev: Math.sqrt(times.reduce((a, b) => a + (b - mean) ** 2, 0) / times.length) };
  });
  return { tool: 'own loop (spawnSync)', rows };
}

try {
  const pw = join(h.home, 'password');
  writeFileSync(pw, 'bench password\n', { mode: 0o600 });
  stashRun(['vault', 'init', '--password-file', pw]);
  stashRun(['container', 'create', 'work', '--password-file', pw]);
  stashRun(['set', 'work', 'API_TOKEN', '--password-file', pw], 'not-a-real-token\n');
  // No password source from here on: a get that works uses the cached keys.
  if (stashRun(['get', 'work', 'API_TOKEN']) !== 'not-a-real-token') throw new Error('stash get did not print the stored value');
  const quote = (s) => (/\s/.test(s) ? `'${s}'` : s);
  const commands = [
    { argv: [...stash, 'get', 'work', 'API_TOKEN'], name: 'stash get work API_TOKEN (cached key)' },
    { argv: [process.execPath, '-e', '0'], name: 'node -e 0' },
    { argv: [...stash, 'vault', 'sessions'], name: 'stash vault sessions (no target)' },
  ].map((c) => ({ ...c, line: c.argv.map(quote).join(' ') }));
  const { tool, rows } = timeCommands(commands);
  // The verdict uses the means (as the first figures did); the medians are steadier on a shared machine.
  const ratio = rows[0].mean / rows[1].mean;
  const medianRatio = rows[0].median / rows[1].median;
  report('`stash get` with a cached key, and `stash vault sessions`', ['command', 'mean ms', 'median ms', 'stddev ms', 'ratio of means to node -e 0 (target < 2)', 'ratio of medians'], [
    [commands[0].name, fmt.ms(rows[0].mean), fmt.ms(rows[0].median), fmt.ms(rows[0].stddev), fmt.ratio(ratio), fmt.ratio(medianRatio)],
    [commands[1].name, fmt.ms(rows[1].mean), fmt.ms(rows[1].median), fmt.ms(rows[1].stddev), '1.00', '1.00'],
    [commands[2].name, fmt.ms(rows[2].mean), fmt.ms(rows[2].median), fmt.ms(rows[2].stddev), fmt.ratio(rows[2].mean / rows[1].mean), fmt.ratio(rows[2].median / rows[1].median)],
  ], [
    `command: \`node bench/cli-get.js\` (${tool}, ${RUNS} runs each after warm-up; agent autostarted by the setup commands, STASH_KDF=test for the setup only)`,
    `target: < 2 x node -e 0: ${ratio < 2 ? 'met' : 'not met'} (${fmt.ratio(ratio)})`,
    `conditions: ${conditions()}`,
  ]);
} finally {
  spawnSync(stash[0], [...stash.slice(1), 'vault', 'sessions', 'stop'], { cwd: root, env: h.env, stdio: 'ignore' });
  h.remove();
}
