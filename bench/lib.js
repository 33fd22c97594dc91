// Shared pieces of the bench/ scripts: quick mode, CPU pinning, running the
// compiled commands, markdown tables. Scripts use the compiled dist/ (run
// `npm run compile` first) and the real binaries in bin/.
import { spawn, spawnSync } from 'node:child_process';
import { appendFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { fileURLToPath } from 'node:url';
import { join } from 'node:path';

export const root = fileURLToPath(new URL('..', import.meta.url));
export const dist = (path) => join(root, 'dist', path);
export const bin = (name) => join(root, 'bin', name);

// Every process a bench starts runs as on a user's machine: without NODE_EXTRA_CA_CERTS,
// which the development machines set to Debian's bundle of 150 certificates. Node 20 reads
// and parses that file at every start (22 and later only when TLS needs it): 60-70 ms of
// CPU added to both sides of a ratio to `node -e 0`, which flattered `stash get` (1.26
// with it, 1.65 without, 2026-11-26). The benches talk only to loopback.
delete process.env.NODE_EXTRA_CA_CERTS;

/** BENCH_QUICK=1: tiny runs (CI, tests): the scripts must work, the figures mean little. */
export const quick = process.env.BENCH_QUICK === '1';

export function hasCommand(name) {
  return spawnSync('sh', ['-c', `command -v ${name}`], { stdio: 'ignore' }).status === 0;
}

/** Server on CPU 0, load generator on CPU 1, when taskset exists and there are two CPUs. */
export const pinning = hasCommand('taskset') && availableParallelism() >= 2 ? { server: 0, load: 1 } : undefined;

/** argv prefixed with `taskset -c CPU` when pinning is possible. */
export function pinned(cpu, argv) {
  return pinning && cpu !== undefined ? ['taskset', '-c', String(cpu), ...argv] : argv;
}

/** Runs argv to completion; resolves with stdout, rejects with stderr on a non-zero exit. */
export function run(argv, opts = {}) {
  return new Promise((resolve, reject) => {
    const child = spawn(argv[0], argv.slice(1), { cwd: root, stdio: ['ignore', 'pipe', 'pipe'], ...opts });
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => {
      out += d;
    });
    child.stderr.on('data', (d) => {
      err += d;
    });
    child.on('error', reject);
    child.on('close', (code, signal) => {
      if (code === 0) resolve(out);
      else reject(new Error(`${argv.join(' ')} failed (${signal ?? code}): ${err.trim().slice(0, 2000)}`));
    });
  });
}

/** A markdown table. */
export function table(headers, rows) {
  const line = (cells) => `| ${cells.join(' | ')} |`;
  return [line(headers), line(headers.map(() => '---')), ...rows.map(line)].join('\n');
}

export const fmt = {
  int: (n) => Math.round(n).toLocaleString('en-US'),
  ms: (n) => n.toFixed(3),
  us: (n) => n.toFixed(1),
  ratio: (n) => n.toFixed(2),
  mb: (bytes) => (bytes / 1048576).toFixed(1),
};

/** Prints the title, the table and how it was measured. */
export function report(title, headers, rows, notes) {
  process.stdout.write(`### ${title}\n\n${table(headers, rows)}\n\n${notes.map((n) => `- ${n}`).join('\n')}\n`);
}

export function conditions() {
  const load =
    spawnSync('cat', ['/proc/loadavg'], { encoding: 'utf8' }).stdout?.split(' ').slice(0, 3).join(' ') ?? 'n/a';
  return `${availableParallelism()} CPUs, load average ${load}, node ${process.version}${quick ? ', BENCH_QUICK=1 (tiny run)' : ''}`;
}

/**
 * Records one figure of the targets table for bench/run-all.js
 * (BENCH_SUMMARY names a file of JSON lines; unset: nothing is recorded).
 * `value` and `baseline` are what the script printed; `met` is the target's
 * own test of the figure (some targets ask for every round, not the median).
 */
export function recordTarget({ figure, value, baseline, target, met, command }) {
  const file = process.env.BENCH_SUMMARY;
  if (!file) return;
  const load =
    spawnSync('cat', ['/proc/loadavg'], { encoding: 'utf8' }).stdout?.split(' ').slice(0, 3).join(' ') ?? 'n/a';
  appendFileSync(
    file,
    `${JSON.stringify({ figure, value, baseline, target, met, command, load, at: new Date().toISOString() })}\n`,
  );
}
