#!/usr/bin/env node
// Runs every test/**/*.test.ts in its own Node process (TypeScript through tsx),
// so a suite that starts agents, servers or crashing children cannot disturb
// another. Prints each suite's result and ends with "N passed, N failed".
//   node test/run.js [substring ...] [--skip substring ...]
//     run only suites whose path contains a substring, leaving out those that contain a --skip one
import { spawn } from 'node:child_process';
import { readdirSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const filters = [];
const skips = [];
for (let i = 2; i < process.argv.length; i++) {
  if (process.argv[i] === '--skip') {
    if (process.argv[i + 1] === undefined) {
      console.error('test/run.js: --skip needs a substring');
      process.exit(64);
    }
    skips.push(process.argv[++i]);
  } else {
    filters.push(process.argv[i]);
  }
}
const suiteTimeoutMs = Number(process.env.STASH_TEST_SUITE_TIMEOUT_MS ?? 600_000);

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

function runSuite(file) {
  return new Promise((resolveSuite) => {
    const started = Date.now();
    const child = spawn(process.execPath, ['--import', 'tsx', file], {
      cwd: root,
      env: { ...process.env, FORCE_COLOR: '0' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (d) => { output += d; });
    child.stderr.on('data', (d) => { output += d; });
    const timer = setTimeout(() => {
      output += `\n(suite killed after ${suiteTimeoutMs} ms)\n`;
      child.kill('SIGKILL');
    }, suiteTimeoutMs);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      const num = (label) => Number((output.match(new RegExp(`${label}:\\s+(\\d+)`)) ?? [])[1] ?? 0);
      const total = num('Total');
      const passed = num('Passed');
      const skipped = num('Skipped') + (output.match(/^SKIP: /gm) ?? []).length;
      const ok = code === 0 && signal === null && total > 0 && passed + num('Skipped') === total;
      resolveSuite({ file, ok, total, passed, skipped, output, ms: Date.now() - started, code, signal });
    });
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

let passed = 0;
let failed = 0;
let skipped = 0;
const failures = [];
for (const file of files) {
  const r = await runSuite(file);
  const name = relative(root, file);
  const skipLines = r.output.split('\n').filter((l) => l.startsWith('SKIP: '));
  if (r.ok) {
    passed += r.passed;
    skipped += r.skipped;
    console.log(`ok    ${name}  (${r.passed} passed${r.skipped ? `, ${r.skipped} skipped` : ''}, ${r.ms} ms)`);
    for (const l of skipLines) console.log(`      ${l}`);
  } else {
    passed += r.passed;
    const lost = Math.max(1, r.total - r.passed);
    failed += lost;
    failures.push(name);
    console.log(`FAIL  ${name}  (exit ${r.code ?? r.signal}, ${r.ms} ms)`);
    console.log(r.output.split('\n').map((l) => `      ${l}`).join('\n'));
  }
}
if (failures.length) console.log(`\nfailed suites: ${failures.join(', ')}`);
console.log(`\n${passed} passed, ${failed} failed${skipped ? `, ${skipped} skipped` : ''}`);
process.exit(failed === 0 ? 0 : 1);
