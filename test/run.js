#!/usr/bin/env node
// Runs every test/**/*.test.ts in its own Node process (compiled to JavaScript first,
// test/compile-tests.js),
// so a suite that starts agents, servers or crashing children cannot disturb
// another. Several suites run at once (they mostly wait on child processes);
// each suite keeps its own folders, ports and agent directories, so none depends
// on another's timing. Each suite's result is printed whole when it ends, and
// the run ends with "N passed, N failed".
//   node test/run.js [substring ...] [--skip substring ...] [--jobs N] [--record-times]
//     substrings       run only suites whose path contains one of them
//     --skip S         leave out suites whose path contains S (repeatable)
//     --jobs N, -j N   run N suites at once (default: STASH_TEST_JOBS, else 3 per CPU, at most 6)
//     --record-times   write this run's wall times into test/suite-times.json
// Environment: STASH_TEST_SUITE_TIMEOUT_MS (per suite, default 600000),
// STASH_TEST_CPU=1 (print each suite's CPU seconds, measured by /usr/bin/time).
// A suite whose source holds a line `// @alone: <reason>` runs by itself after
// the others (the reason is printed); keep that list tiny.
import { spawn } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { compileTests } from './compile-tests.js';
import { countSkipMarkers, suiteResult } from './suite-result.js';

const root = fileURLToPath(new URL('..', import.meta.url));
const timesFile = join(root, 'test', 'suite-times.json');

function usage(message) {
  console.error(`test/run.js: ${message}`);
  process.exit(64);
}

function parseJobs(value, from) {
  if (!/^[1-9][0-9]{0,2}$/.test(value ?? ''))
    usage(`${from} needs a whole number of suites from 1 to 999, not ${JSON.stringify(value ?? '')}`);
  return Number(value);
}

const filters = [];
const skips = [];
let jobs = process.env.STASH_TEST_JOBS
  ? parseJobs(process.env.STASH_TEST_JOBS, 'STASH_TEST_JOBS')
  : Math.min(6, 3 * availableParallelism());
let recordTimes = false;
for (let i = 2; i < process.argv.length; i++) {
  const arg = process.argv[i];
  if (arg === '--skip') {
    if (process.argv[i + 1] === undefined) usage('--skip needs a substring');
    skips.push(process.argv[++i]);
  } else if (arg === '--jobs' || arg === '-j') {
    jobs = parseJobs(process.argv[++i], arg);
  } else if (arg.startsWith('--jobs=')) {
    jobs = parseJobs(arg.slice('--jobs='.length), '--jobs');
  } else if (arg === '--record-times') {
    recordTimes = true;
  } else if (arg.startsWith('-')) {
    usage(`unknown option ${arg} (options: --skip S, --jobs N, --record-times)`);
  } else {
    filters.push(arg);
  }
}
const suiteTimeoutMs = Number(process.env.STASH_TEST_SUITE_TIMEOUT_MS ?? 600_000);
const measureCpu = process.env.STASH_TEST_CPU === '1' && existsSync('/usr/bin/time');
// The suites' environment. NODE_EXTRA_CA_CERTS is left out: Node 20 reads and parses
// that file at every start (22 and later only when TLS needs it), 50-70 ms of CPU per
// process with Debian's bundle of 150 certificates, and a run starts thousands of
// node processes (the suites, each stash command, agents, servers). The suites talk
// only to loopback, trusting the test CAs they make, and install only offline.
const suiteEnv = { ...process.env, FORCE_COLOR: '0' };
delete suiteEnv.NODE_EXTRA_CA_CERTS;

function findTests(dir) {
  const out = [];
  for (const name of readdirSync(dir).sort()) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) {
      if (name !== 'fixtures' && name !== 'helpers') out.push(...findTests(path));
    } else if (name.endsWith('.test.ts')) {
      out.push(path);
    }
  }
  return out;
}

/** Suites still running, so a signal to the runner can end their process groups. */
const running = new Set();
/** The compiled copy of the tests this run starts suites from (test/compile-tests.js). */
let compiled = null;

function killGroup(child, signal) {
  try {
    process.kill(-child.pid, signal);
  } catch {
    child.kill(signal);
  }
}

function runSuite(file) {
  return new Promise((resolveSuite) => {
    const started = Date.now();
    const cpuDir = measureCpu ? mkdtempSync(join(tmpdir(), 'stash-test-cpu-')) : null;
    const argv = [
      process.execPath,
      '--enable-source-maps',
      join(compiled.dir, relative(root, file).replace(/\.ts$/, '.js')),
    ];
    if (cpuDir) argv.unshift('/usr/bin/time', '-f', '%U %S', '-o', join(cpuDir, 'cpu'));
    // Its own process group: a suite killed at its timeout takes the servers,
    // agents and helpers it started (and did not detach) with it.
    const child = spawn(argv[0], argv.slice(1), {
      cwd: root,
      env: suiteEnv,
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
    });
    running.add(child);
    let output = '';
    child.stdout.on('data', (d) => {
      output += d;
    });
    child.stderr.on('data', (d) => {
      output += d;
    });
    const timer = setTimeout(() => {
      output += `\n(suite killed after ${suiteTimeoutMs} ms)\n`;
      killGroup(child, 'SIGKILL');
    }, suiteTimeoutMs);
    // Done when the suite's process has exited and its output has ended, or 2 s after the
    // exit: a process it left behind (an agent a failed test did not stop) may hold the
    // output pipes open for ever, and the suite would wait out its timeout (600 s, seen
    // under load 28 on 2026-11-26).
    let exit = null;
    let graceTimer = null;
    child.on('exit', (code, signal) => {
      exit = { code, signal };
      graceTimer = setTimeout(() => {
        output += '\n(output still open 2 s after the suite exited: a process it started holds it)\n';
        child.stdout.destroy();
        child.stderr.destroy();
        finish();
      }, 2000);
    });
    child.on('close', () => finish());
    let finished = false;
    const finish = () => {
      if (finished || exit === null) return;
      finished = true;
      clearTimeout(timer);
      clearTimeout(graceTimer);
      running.delete(child);
      const { code, signal } = exit;
      let cpu = null;
      if (cpuDir) {
        const m = /^([\d.]+) ([\d.]+)\s*$/m.exec(
          existsSync(join(cpuDir, 'cpu')) ? readFileSync(join(cpuDir, 'cpu'), 'utf8') : '',
        );
        if (m) cpu = Number(m[1]) + Number(m[2]);
        rmSync(cpuDir, { recursive: true, force: true });
      }
      const { ok, total, passed, skipped } = suiteResult(output, code, signal);
      resolveSuite({ file, ok, total, passed, skipped, output, ms: Date.now() - started, cpu, code, signal });
    };
  });
}

for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
  process.on(signal, () => {
    for (const child of running) killGroup(child, 'SIGKILL');
    compiled?.remove();
    process.exit(130);
  });
}

const files = findTests(join(root, 'test')).filter((f) => {
  const name = relative(root, f);
  return (filters.length === 0 || filters.some((s) => name.includes(s))) && !skips.some((s) => name.includes(s));
});
if (files.length === 0) {
  console.error('test/run.js: no test suites matched');
  process.exit(1);
}

// Longest first (by the recorded wall times), so the last suites to start are
// short ones and the run does not end waiting on one long suite. A suite with
// no record counts as long: it is new, and may be.
const times = existsSync(timesFile) ? JSON.parse(readFileSync(timesFile, 'utf8')) : {};
const guess = Math.max(0, ...Object.values(times));
const weight = (f) => times[relative(root, f)] ?? guess;
const alone = new Map();
for (const f of files) {
  const m = /^\/\/ @alone: (.+)$/m.exec(readFileSync(f, 'utf8'));
  if (m) alone.set(f, m[1].trim());
}
const pooled = files.filter((f) => !alone.has(f)).sort((a, b) => weight(b) - weight(a));

try {
  compiled = compileTests(root);
  // Suites start their TypeScript fixtures from the copy too (tsNode in test/helpers/facility.ts).
  suiteEnv.STASH_TEST_COMPILED = compiled.dir;
  // One warm code cache that every test environment starts from (test/helpers/code-cache-seed.ts).
  suiteEnv.STASH_TEST_CODE_CACHE = join(compiled.dir, 'code-cache-seed');
  mkdirSync(suiteEnv.STASH_TEST_CODE_CACHE, { mode: 0o700 });
} catch (err) {
  // esbuild's errors name the file and line; anything else is a problem with the folder.
  const what = Array.isArray(err.errors) ? 'the tests do not compile' : 'cannot make the compiled copy of the tests';
  console.error(`test/run.js: ${what}:\n${err.message}`);
  console.log('\n0 passed, 1 failed');
  process.exit(1);
}

let passed = 0;
let failed = 0;
let skipped = 0;
const failures = [];
const measured = {};
const runStarted = Date.now();

function report(r) {
  const name = relative(root, r.file);
  measured[name] = Math.round(r.ms / 100) / 10;
  const skipLines = r.output.split('\n').filter((l) => countSkipMarkers(l) > 0);
  const cpu = r.cpu === null ? '' : `, cpu ${r.cpu.toFixed(1)} s`;
  if (r.ok) {
    passed += r.passed;
    skipped += r.skipped;
    console.log(`ok    ${name}  (${r.passed} passed${r.skipped ? `, ${r.skipped} skipped` : ''}, ${r.ms} ms${cpu})`);
    for (const l of skipLines) console.log(`      ${l.slice(l.search(/(?<![\w(])SKIP: /))}`);
  } else {
    passed += r.passed;
    skipped += r.skipped;
    const lost = Math.max(1, r.total - r.passed - r.skipped);
    failed += lost;
    failures.push(name);
    console.log(`FAIL  ${name}  (exit ${r.code ?? r.signal}, ${r.ms} ms${cpu})`);
    console.log(
      r.output
        .split('\n')
        .map((l) => `      ${l}`)
        .join('\n'),
    );
  }
}

async function worker(queue) {
  for (let file = queue.shift(); file !== undefined; file = queue.shift()) report(await runSuite(file));
}

const queue = [...pooled];
await Promise.all(Array.from({ length: Math.min(jobs, queue.length) }, () => worker(queue)));
for (const [file, reason] of alone) {
  console.log(`(running ${relative(root, file)} alone: ${reason})`);
  report(await runSuite(file));
}

compiled.remove();
if (recordTimes) {
  const merged = { ...times, ...measured };
  const sorted = Object.fromEntries(
    Object.keys(merged)
      .sort()
      .filter((k) => existsSync(join(root, k)))
      .map((k) => [k, merged[k]]),
  );
  writeFileSync(timesFile, `${JSON.stringify(sorted, null, 2)}\n`);
}
console.log(
  `\n${files.length} suite${files.length === 1 ? '' : 's'} in ${Math.round((Date.now() - runStarted) / 1000)} s, ${Math.min(jobs, files.length)} at a time`,
);
if (failures.length) console.log(`\nfailed suites: ${failures.join(', ')}`);
console.log(`\n${passed} passed, ${failed} failed, ${skipped} skipped`);
process.exit(failed === 0 ? 0 : 1);
