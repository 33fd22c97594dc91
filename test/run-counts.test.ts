/**
 * test/run.js's closing line counts a suite's skipped tests as skipped, not passed,
 * wherever the skip marker is printed: uvu prints its progress dots without a newline,
 * so a test that skips prints "• • SKIP: ..." (windows-prompt once reported "4 passed"
 * with its Wine tests never run). The runner itself runs here on a checkout of three
 * files and one suite of its own, made in a temporary folder.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { spawnSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { needFacility } from './helpers/facility.js';

const suite = `import { test } from 'uvu';
import { needFacility } from './helpers/facility.js';
test('runs', () => {});
test('needs a facility that is absent', () => {
  if (!needFacility(false, 'a planted facility', 'this machine has none')) return;
  throw new Error('ran without its facility');
});
test('prints a skip of its own after the dots', () => {
  console.log('SKIP: Linux only');
});
test('runs too', () => {});
test.run();
`;

/** A checkout holding test/run.js and what it needs, plus `suite`; returns its root. */
function checkout(): string {
  const root = mkdtempSync(join(tmpdir(), 'stash-run-counts-'));
  mkdirSync(join(root, 'src'));
  mkdirSync(join(root, 'test', 'helpers'), { recursive: true });
  for (const f of ['run.js', 'compile-tests.js', 'suite-result.js', 'helpers/facility.ts'])
    copyFileSync(resolve('test', f), join(root, 'test', f));
  symlinkSync(resolve('node_modules'), join(root, 'node_modules'));
  writeFileSync(join(root, 'test', 'skips.test.ts'), suite);
  return root;
}

function runRunner(root: string, env: NodeJS.ProcessEnv) {
  const clean = { ...process.env, ...env };
  for (const k of ['STASH_TEST_STRICT', 'CI', 'STASH_TEST_COMPILED', 'STASH_TEST_CODE_CACHE']) delete clean[k];
  Object.assign(clean, env);
  for (const [k, v] of Object.entries(env)) if (v === undefined) delete clean[k];
  return spawnSync(process.execPath, [join(root, 'test', 'run.js'), '--jobs', '1'], {
    cwd: root,
    env: clean,
    encoding: 'utf8',
    timeout: 60_000,
  });
}

test('skips printed after the progress dots count as skipped; the last line says so', () => {
  const root = checkout();
  try {
    const r = runRunner(root, {});
    const lines = r.stdout.trim().split('\n');
    assert.is(lines.at(-1), '2 passed, 0 failed, 2 skipped', r.stdout + r.stderr);
    assert.is(r.status, 0, r.stdout + r.stderr);
    assert.match(r.stdout, /ok {4}test\/skips\.test\.ts {2}\(2 passed, 2 skipped/);
    assert.match(r.stdout, /\n {6}SKIP: a planted facility: this machine has none\n/);
    assert.match(r.stdout, /\n {6}SKIP: Linux only\n/);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});

test('under CI=true a missing facility fails instead of skipping', () => {
  const root = checkout();
  try {
    const r = runRunner(root, { CI: 'true' });
    assert.is(r.status, 1, r.stdout + r.stderr);
    assert.match(r.stdout, /FAIL {2}test\/skips\.test\.ts/);
    assert.match(r.stdout, /required facility missing \(a planted facility\)/);
    assert.match(r.stdout.trim().split('\n').at(-1) ?? '', /^2 passed, 1 failed, 1 skipped$/);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});

test('needFacility in this very process follows the same rule', () => {
  // The suite itself runs under whatever CI sets; it must not skip a facility that is present.
  assert.is(needFacility(true, 'present', 'never printed'), true);
});

test.run();
