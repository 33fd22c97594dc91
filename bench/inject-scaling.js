// `stash inject` over templates of 10,000, 100,000 and 1,000,000 references
// (16 bytes each, `{{stash://w/A}}` and a newline, ten entries in turn: the
// 1,000,000 one is 16 MB, under inject's 16 MiB cap), CPU seconds and peak
// RSS (wait4), beside `sed` substituting the same placeholders and `cat`
// of the same template, in interleaved rounds (BENCH_ROUNDS, default 3).
// Each run's output is checked byte for byte against sed's. The cost per
// reference is the CPU above an inject of the ten references once each (the
// start of a node process, the agent round trip, the container opened and
// read), divided by the references.
// Target: per reference, 1,000,000 at most 2 x 10,000.
//   node bench/inject-scaling.js [REFS ...]   (BENCH_QUICK=1 for a tiny run)
import { spawnSync } from 'node:child_process';
import { readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { agentHome } from './agent-lib.js';
import { bin, conditions, fmt, quick, report, root } from './lib.js';

const SIZES = process.argv.slice(2).length
  ? process.argv.slice(2).map(Number)
  : quick
    ? [2000, 10000, 20000]
    : [10000, 100000, 1000000];
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? (quick ? 1 : 3));
const TARGET = 2;
const ENTRIES = 'ABCDEFGHIJ'.split('');
const entryValue = (e) => `value-of-${e}-0123456789`;
const PYTHON = '/usr/bin/python3';
if (!statSync(PYTHON, { throwIfNoEntry: false })) {
  process.stdout.write(`### stash inject scaling\n\nnot measured: ${PYTHON} (for wait4) is missing\n`);
  process.exit(0);
}
const h = agentHome({ STASH_KDF: 'test' });
const stash = [process.execPath, bin('stash.js')];

// CPU and peak RSS of one child from wait4(2), to the microsecond: GNU time and
// bash's `times` print hundredths or thousandths of a second, coarser than the
// whole cost of 10,000 references.
const WAIT4 = `
import os, sys
out = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
pid = os.posix_spawnp(sys.argv[2], sys.argv[2:], os.environ, file_actions=[(os.POSIX_SPAWN_DUP2, out, 1)])
_, status, ru = os.wait4(pid, 0)
print(ru.ru_utime + ru.ru_stime, ru.ru_maxrss * 1024, os.waitstatus_to_exitcode(status))
`;

/** Runs argv with stdout to `out`: its CPU seconds (user + system) and peak RSS in bytes. */
function timed(argv, out) {
  const r = spawnSync(PYTHON, ['-c', WAIT4, out, ...argv], { cwd: root, env: h.env, encoding: 'utf8' });
  const [cpu, rss, code] = (r.stdout ?? '').trim().split(' ').map(Number);
  if (r.status !== 0 || code !== 0)
    throw new Error(`${argv.join(' ')} failed (${code ?? r.status}): ${r.stderr.slice(0, 2000)}`);
  return { cpu, rss };
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

function template(n) {
  const line = ENTRIES.map((e) => `{{stash://w/${e}}}\n`);
  const parts = new Array(n);
  for (let i = 0; i < n; i++) parts[i] = line[i % ENTRIES.length];
  return parts.join('');
}

try {
  const pw = join(h.home, 'password');
  writeFileSync(pw, 'bench password\n', { mode: 0o600 });
  h.stash(['vault', 'init', '--password-file', pw]);
  h.stash(['container', 'create', 'w', '--password-file', pw]);
  for (const e of ENTRIES) h.stash(['set', 'w', e, '--raw', '--password-file', pw], entryValue(e));
  const sedArgs = ['sed', ...ENTRIES.flatMap((e) => ['-e', `s#{{stash://w/${e}}}#${entryValue(e)}#g`])];
  const small = join(h.home, 'small.tpl');
  writeFileSync(small, template(ENTRIES.length));
  const out = join(h.home, 'out');
  const expected = join(h.home, 'expected');
  const fixed = [];
  const rows = new Map(SIZES.map((n) => [n, { stash: [], rss: [], sed: [], cat: [] }]));
  for (let round = 0; round < ROUNDS; round++) {
    fixed.push(timed([...stash, 'inject', '-i', small], out).cpu);
    for (const n of SIZES) {
      const tpl = join(h.home, `t${n}.tpl`);
      if (round === 0) writeFileSync(tpl, template(n));
      const r = rows.get(n);
      r.sed.push(timed([...sedArgs, tpl], expected).cpu);
      r.cat.push(timed(['cat', tpl], out).cpu);
      const s = timed([...stash, 'inject', '-i', tpl], out);
      if (!readFileSync(out).equals(readFileSync(expected)))
        throw new Error(`stash inject of ${n} references differs from sed's output`);
      r.stash.push(s.cpu);
      r.rss.push(s.rss);
    }
  }
  const base = median(fixed);
  const perRef = (n) => Math.max(0, median(rows.get(n).stash) - base) / n;
  const body = SIZES.map((n) => {
    const r = rows.get(n);
    return [
      fmt.int(n),
      fmt.mb(statSync(join(h.home, `t${n}.tpl`)).size),
      fmt.ms(median(r.stash)),
      fmt.us(perRef(n) * 1e6),
      fmt.mb(median(r.rss)),
      fmt.ms(median(r.sed)),
      fmt.us((median(r.sed) / n) * 1e6),
      fmt.ms(median(r.cat)),
    ];
  });
  const first = SIZES[0];
  const last = SIZES[SIZES.length - 1];
  const growth = perRef(last) / perRef(first);
  report(
    '`stash inject` against its template size',
    [
      'references',
      'template MB',
      'stash inject CPU s',
      'per reference us (above 10 references)',
      'peak RSS MB',
      'sed CPU s',
      'sed per reference us',
      'cat CPU s',
    ],
    body,
    [
      `command: \`node bench/inject-scaling.js\` (wait4: user + system CPU, median of ${ROUNDS} interleaved round(s), BENCH_ROUNDS; every output checked against sed's)`,
      `a template of the ${ENTRIES.length} references once each: ${fmt.ms(base)} CPU s (node's start, the agent round trip, the container read), taken off each inject before dividing`,
      perRef(first) > 0
        ? `per reference, ${fmt.int(last)} against ${fmt.int(first)}: ${fmt.ratio(growth)} x (target <= ${TARGET}: ${growth <= TARGET ? 'met' : 'not met'})`
        : `per reference: ${fmt.int(first)} references cost no more than the ${ENTRIES.length} of the fixed part (noise): no ratio`,
      `conditions: ${conditions()}`,
    ],
  );
} finally {
  spawnSync(stash[0], [...stash.slice(1), 'vault', 'sessions', 'stop'], { cwd: root, env: h.env, stdio: 'ignore' });
  h.remove();
}
