/**
 * scripts/check-layers.js on small trees of its own: a clean tree passes, and each
 * kind of problem planted in a copy of it (an import that climbs a layer, a
 * value-import cycle, static or through import(), a function over 80 lines, a
 * LONG_FUNCTIONS entry outgrown or no longer needed, a folder the table does not
 * know) fails the run with a `file:line: message` line naming it. The real tree is
 * checked by `npm test` itself (after lint).
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';

const script = resolve('scripts', 'check-layers.js');
const roots: string[] = [];

/** `n` lines of a function body. */
const body = (n: number): string => Array.from({ length: n }, (_, i) => `  const v${i} = ${i};`).join('\n');

/** A function of exactly `lines` lines, declaration and closing brace included. */
const fn = (name: string, lines: number): string => `export function ${name}(): void {\n${body(lines - 2)}\n}\n`;

// A tree that keeps every rule: each part imports only what it may, types both ways.
const CLEAN: Record<string, string> = {
  'src/errors.ts': 'export class StashError extends Error {}\n',
  'src/native/binding.ts': "import { StashError } from '../errors.js';\nexport const e = StashError;\n",
  'src/protocol/frame.ts': "import { e } from '../native/binding.js';\nexport const frame = e;\n",
  'src/vault/names.ts': "import { StashError } from '../errors.js';\nexport const n = StashError;\n",
  'src/config/settings.ts': "import { n } from '../vault/names.js';\nexport const c = n;\n",
  'src/agent/transport.ts':
    "import type { Net } from './transport-net.js';\nexport async function open(): Promise<Net> {\n  return (await import('./transport-net.js')).net;\n}\n",
  'src/agent/transport-net.ts':
    "import { frame } from '../protocol/frame.js';\nimport { c } from '../config/settings.js';\nexport type Net = typeof frame;\nexport const net = c ? frame : frame;\n",
  'src/keyserver/pages.ts':
    "import { n } from '../vault/names.js';\nimport { c } from '../config/settings.js';\nexport const p = [n, c];\n",
  'src/cli/main.ts':
    "import { open } from '../agent/transport.js';\nimport { p } from '../keyserver/pages.js';\nexport const m = [open, p];\n",
  'src/cli/long.ts': fn('justShortEnough', 80),
};

/** A new tree: CLEAN with `changes` written over it (null removes a file). */
function tree(changes: Record<string, string | null> = {}): string {
  const root = mkdtempSync(join(tmpdir(), 'stash-check-layers-'));
  roots.push(root);
  for (const [file, text] of Object.entries({ ...CLEAN, ...changes })) {
    if (text === null) continue;
    mkdirSync(dirname(join(root, file)), { recursive: true });
    writeFileSync(join(root, file), text);
  }
  return root;
}

function check(root: string): { code: number | null; lines: string[]; stderr: string } {
  const r = spawnSync(process.execPath, [script, root], { encoding: 'utf8' });
  return { code: r.status, lines: r.stdout.split('\n').filter(Boolean), stderr: r.stderr };
}

/** Checks that `changes` fail the check with exactly `expected` (each a line, or a pattern for one). */
function fails(changes: Record<string, string | null>, expected: Array<string | RegExp>): void {
  const r = check(tree(changes));
  assert.is(r.code, 1, `exit status; output:\n${r.lines.join('\n')}\n${r.stderr}`);
  assert.is(r.lines.length, expected.length, r.lines.join('\n'));
  expected.forEach((e, i) => {
    if (typeof e === 'string') assert.is(r.lines[i], e);
    else assert.match(r.lines[i]!, e);
  });
}

test('a clean tree passes, with type cycles, a dynamic import and an 80-line function', () => {
  const r = check(tree());
  assert.is(r.stderr, '');
  assert.equal(r.lines, []);
  assert.is(r.code, 0);
});

test('an import that climbs a layer fails, type imports included', () => {
  fails({ 'src/keyserver/uses-cli.ts': "import { m } from '../cli/main.js';\nexport const x = m;\n" }, [
    'src/keyserver/uses-cli.ts:1: keyserver imports src/cli/main.ts; keyserver may import only shared, native, vault, config',
  ]);
  fails(
    { 'src/agent/uses-keyserver.ts': "\nimport type { p } from '../keyserver/pages.js';\nexport type X = typeof p;\n" },
    [/^src\/agent\/uses-keyserver\.ts:2: agent imports src\/keyserver\/pages\.ts; agent may import only /],
  );
  fails({ 'src/protocol/uses-agent.ts': "export const later = () => import('../agent/transport.js');\n" }, [
    /^src\/protocol\/uses-agent\.ts:1: protocol imports src\/agent\/transport\.ts; /,
  ]);
  fails({ 'src/vault/uses-cli.ts': "export * from '../cli/main.js';\n" }, [
    /^src\/vault\/uses-cli\.ts:1: vault imports src\/cli\/main\.ts; /,
  ]);
});

test('a folder the table does not know fails', () => {
  fails({ 'src/plugins/x.ts': 'export const x = 1;\n' }, [
    'src/plugins/x.ts:1: src/plugins is not in the LAYERS table of scripts/check-layers.js: say what it may import',
  ]);
});

test('a value-import cycle fails, static or through import(); a type-only one does not', () => {
  fails(
    {
      'src/cli/a.ts': "import { b } from './b.js';\nexport const a = () => b;\n",
      'src/cli/b.ts': "import { c } from './c.js';\nexport const b = () => c;\n",
      'src/cli/c.ts': "import { a } from './a.js';\nexport const c = () => a;\n",
    },
    ['src/cli/a.ts:1: value-import cycle: src/cli/a.ts -> src/cli/b.ts -> src/cli/c.ts -> src/cli/a.ts'],
  );
  // transport-net.ts imports the file that loads it with import().
  fails(
    {
      'src/agent/transport-net.ts': `${CLEAN['src/agent/transport-net.ts']}import { open } from './transport.js';\nexport const again = open;\n`,
    },
    [
      'src/agent/transport-net.ts:5: value-import cycle: src/agent/transport-net.ts -> src/agent/transport.ts -> src/agent/transport-net.ts',
    ],
  );
  const typeOnly = check(
    tree({
      'src/cli/a.ts': "import { type B } from './b.js';\nexport interface A { b?: B }\n",
      'src/cli/b.ts': "import type { A } from './a.js';\nexport interface B { a?: A }\n",
    }),
  );
  assert.equal(typeOnly.lines, []);
  assert.is(typeOnly.code, 0);
});

test('a function over 80 lines fails: declarations, methods, arrows, function expressions', () => {
  fails(
    {
      'src/cli/long.ts': fn('tooLong', 81),
      'src/vault/shape.ts': `export class Shape {\n  area(): number {\n${body(80)}\n    return 0;\n  }\n}\n`,
      'src/native/arrow.ts': `export const arrow = (): void => {\n${body(81)}\n};\n`,
      'src/agent/callback.ts': `export function outer(): void {\n  setTimeout(function () {\n${body(79)}\n  });\n}\n`,
    },
    [
      'src/agent/callback.ts:1: outer is 83 lines; split it below 81',
      'src/agent/callback.ts:2: outer > setTimeout callback is 81 lines; split it below 81',
      'src/cli/long.ts:1: tooLong is 81 lines; split it below 81',
      'src/native/arrow.ts:1: arrow is 83 lines; split it below 81',
      'src/vault/shape.ts:2: Shape.area is 83 lines; split it below 81',
    ],
  );
});

test('LONG_FUNCTIONS is empty: a function once allowed (runAgentProcess, 195 lines) fails at 81', () => {
  const ok = check(tree({ 'src/agent/main.ts': fn('runAgentProcess', 80) }));
  assert.equal(ok.lines, []);
  assert.is(ok.code, 0);
  fails({ 'src/agent/main.ts': fn('runAgentProcess', 81) }, [
    'src/agent/main.ts:1: runAgentProcess is 81 lines; split it below 81',
  ]);
});

test.after(() => {
  for (const root of roots) rmSync(root, { recursive: true, force: true });
});

test.run();
