// `npm run bench` (after the compile): every bench/ script in turn, then the
// targets, each figure beside its baseline from the same run,
// with its command and the machine's load when it was measured. A script
// that fails is named and the run goes on; the exit status is then 1.
//   node bench/run-all.js [script ...]     (default: all of them; BENCH_QUICK=1 for tiny runs)
// BENCH_SUMMARY=FILE keeps the figures in FILE, adding to what earlier runs of single
// scripts with the same BENCH_SUMMARY recorded there, and the targets come from all of them.
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { conditions, root, table } from './lib.js';
import { SCRIPTS } from './scripts.js';

/** Issue 30's targets table, in its order: the figure each script records (lib.js recordTarget). */
const TARGETS = [
  [
    'flows',
    'flows/s (publish, confirm, fetch) x 3 against bare node:http req/s, server on one core, load on the other',
  ],
  ['publishes', 'publishes/s against bare node:http req/s on the same core'],
  [
    'rss',
    'RSS peak (VmHWM) of the installed service, all its processes: publishing 100,000 shares, confirming them, fetches under publish load',
  ],
  ['cpu-scaling', 'CPU per fetch, 2 processes against 1 (scaling projection)'],
  ['stash-get', '`stash get` (cached key) against `node -e 0`, every round'],
  ['fetch-binary', 'binary fetch of a verified share against bare node:http, same bytes, wrk'],
  ['fetch-binary-nginx', 'the same binary fetch against nginx `return 200` of the same length, wrk'],
];

const chosen = process.argv.slice(2).length > 0 ? process.argv.slice(2) : SCRIPTS;
const work = mkdtempSync(join(tmpdir(), 'stash-bench-'));
const summary = process.env.BENCH_SUMMARY || join(work, 'targets.jsonl');
const failed = [];
const started = Date.now();
try {
  for (const script of chosen) {
    process.stdout.write(`\n`);
    const code = await new Promise((resolve) => {
      const child = spawn(process.execPath, [join(root, 'bench', script)], {
        cwd: root,
        stdio: 'inherit',
        env: { ...process.env, BENCH_SUMMARY: summary },
      });
      child.on('error', () => resolve(-1));
      child.on('close', (c, signal) => resolve(signal ?? c));
    });
    if (code !== 0) {
      failed.push(`${script} (${code})`);
      process.stdout.write(`\nbench/run-all.js: bench/${script} failed (${code}); going on with the next script\n`);
    }
  }
  let recorded = [];
  try {
    recorded = readFileSync(summary, 'utf8')
      .trim()
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l));
  } catch {
    /* nothing recorded */
  }
  const rows = TARGETS.map(([id, name]) => {
    const r = recorded.filter((x) => x.figure === id).pop();
    return r
      ? [
          name,
          r.value,
          r.baseline,
          r.target,
          r.met === undefined ? 'reported' : r.met ? 'met' : 'not met',
          `\`${r.command}\``,
          `${r.at.slice(11, 16)} UTC, load ${r.load}`,
        ]
      : [name, 'not measured', '-', '-', '-', '-', '-'];
  });
  process.stdout.write(
    `\n### Targets\n\n${table(['figure', 'measured', 'baseline in the same run', 'target', 'status', 'command', 'when'], rows)}\n\n`,
  );
  process.stdout.write(
    `- command: \`node bench/run-all.js\` (\`npm run bench\`), ${Math.round((Date.now() - started) / 1000)} s; ${failed.length ? `failed: ${failed.join(', ')}` : 'every script completed'}\n- conditions at the end: ${conditions()}\n`,
  );
} finally {
  rmSync(work, { recursive: true, force: true });
}
process.exitCode = failed.length > 0 ? 1 : 0;
