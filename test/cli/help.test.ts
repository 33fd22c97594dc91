/**
 * The command surface through the real binary: help on every command, strict
 * options, usage errors with exit status 64, errors as `stash: ...`, NO_COLOR,
 * and lazy loading (`stash --help` opens no native addon and imports neither
 * sodium, Koa, the keyring nor the vault or agent code; `stash get` with a
 * cached key loads only the container, agent-client and protocol code).
 * Loading is checked two ways: through bin/stash.js, which runs the CLI bundled
 * into one file (dist/cli/stash.cjs: the recorder sees its require() of
 * packages and builtins and every addon opened), and through the ES modules
 * of dist/ (module by module: the bundle keeps their import() boundaries as
 * lazily run functions, scripts/bundle-cli.js).
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { agentPids, stashBin } from '../helpers/agent.js';
import { commands } from '../../src/cli/registry.js';
import { cliEnv, sharedCliEnv } from './harness.js';

// The two tests that only need a vault (the recorder's control, doctor's colours) share one.
const shared = sharedCliEnv();
test.after(() => shared.dispose());

const recorder = join(process.cwd(), 'test', 'fixtures', 'load-recorder.mjs');
const keyServerBin = join(process.cwd(), 'bin', 'stash_key_server.js');

function stash(args: string[], env: NodeJS.ProcessEnv = {}) {
  const r = spawnSync(process.execPath, [stashBin, ...args], {
    encoding: 'utf8',
    env: { ...process.env, ...env },
    timeout: 20_000,
  });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

function keyServer(args: string[]) {
  const r = spawnSync(process.execPath, [keyServerBin, ...args], { encoding: 'utf8', timeout: 20_000 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

const esmMain = pathToFileURL(join(process.cwd(), 'dist', 'cli', 'main.js')).href;

/**
 * Runs stash under the load recorder; returns the recorded lines. `via`: 'bin'
 * runs bin/stash.js (the bundle), 'esm' calls main() of dist/cli/main.js.
 */
function recordLoads(
  args: string[],
  env: NodeJS.ProcessEnv = {},
  via: 'bin' | 'esm' = 'bin',
): { lines: string[]; code: number | null; stdout: string; stderr: string } {
  const dir = mkdtempSync(join(tmpdir(), 'stash-loads-'));
  const record = join(dir, 'loads.txt');
  const entry =
    via === 'bin'
      ? [stashBin, ...args]
      : [
          '--input-type=module',
          '-e',
          `const { main } = await import(${JSON.stringify(esmMain)}); await main(${JSON.stringify(args)});`,
        ];
  try {
    const r = spawnSync(process.execPath, ['--import', recorder, ...entry], {
      encoding: 'utf8',
      env: { ...process.env, ...env, LOAD_RECORD: record },
      timeout: 20_000,
    });
    let text = '';
    try {
      text = readFileSync(record, 'utf8');
    } catch {
      /* nothing recorded */
    }
    return { lines: text.split('\n').filter(Boolean), code: r.status, stdout: r.stdout, stderr: r.stderr };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const HEAVY = [
  /sodium-native/,
  /\bkoa\b/,
  /@koa\//,
  /@napi-rs\/keyring/,
  /smol-toml/,
  /\/dist\/native\//,
  /\/dist\/vault\//,
  /\/dist\/agent\//,
  /\/dist\/protocol\//,
];

test('`stash --help` lists every command and loads no addon, sodium, Koa, keyring or vault code', () => {
  for (const via of ['bin', 'esm'] as const) {
    const r = recordLoads(['--help'], {}, via);
    assert.is(r.code, 0, r.stderr);
    for (const c of commands) assert.ok(r.stdout.includes(c.path.join(' ')), `help lists ${c.path.join(' ')}`);
    // The recorder works: it saw the launcher load the bundle, or the CLI's own modules being imported.
    if (via === 'bin')
      assert.ok(
        r.lines.includes(`require ${join(process.cwd(), 'dist', 'cli', 'launch.cjs')}`),
        `recorder saw launch.cjs: ${r.lines.join('\n')}`,
      );
    else {
      assert.ok(
        r.lines.some((l) => l.startsWith('import ') && l.includes('/dist/cli/main.js')),
        `recorder saw main.js: ${r.lines.join('\n')}`,
      );
      assert.ok(r.lines.some((l) => l.includes('/dist/cli/registry.js')));
    }
    assert.equal(
      r.lines.filter((l) => l.startsWith('dlopen ')),
      [],
      `${via}: no native addon opened`,
    );
    for (const re of HEAVY)
      assert.not.ok(
        r.lines.some((l) => re.test(l)),
        `${via}: --help loaded ${re}: ${r.lines.filter((l) => re.test(l)).join(', ')}`,
      );
  }
});

test('per-command --help and usage errors also stay light', () => {
  for (const args of [
    ['get', '--help'],
    ['vault', 'sessions', 'auto-unlock', 'enable', '--help'],
    ['env', 'x', '--bogus', '--', 'true'],
    ['vault'],
  ]) {
    for (const via of ['bin', 'esm'] as const) {
      const r = recordLoads(args, {}, via);
      assert.equal(
        r.lines.filter((l) => l.startsWith('dlopen ')),
        [],
        `${via}: ${args.join(' ')} opened no addon`,
      );
      for (const re of HEAVY)
        assert.not.ok(
          r.lines.some((l) => re.test(l)),
          `${via}: ${args.join(' ')} loaded ${re}`,
        );
    }
  }
});

test('the recorder does see an addon when a command needs sodium (control)', async () => {
  const t = await shared.fresh([]);
  const r = recordLoads(['vault', 'identity', 'show'], t.env);
  assert.is(r.code, 0, r.stderr);
  assert.ok(
    r.lines.some((l) => l.startsWith('dlopen ') && /sodium/.test(l)),
    `sodium's addon was recorded: ${r.lines.filter((l) => l.startsWith('dlopen')).join(', ')}`,
  );
});

// What `stash get` with a cached key must not load: each was on that path once,
// or would be an easy regression (docs/benchmarks.md, "`stash get` with a cached key").
const NOT_ON_GET_PATH = [
  /smol-toml/,
  /@napi-rs\/keyring/,
  /\bkoa\b/,
  /@koa\//,
  /\/dist\/keyserver\//,
  /\/dist\/native\/(index|power)\.js/,
  /\/dist\/agent\/(config|main|agent|cache|listener|power)(\.js|\/)/,
  // The config is checked only when a file or a setting variable is there (config-path.ts, a stat).
  /\/dist\/config\/(?!config-path\.js)/,
  /\/dist\/vault\/(index|vault|identity|contacts|fingerprint|fingerprint-display|public-key)\.js/,
  /\/dist\/cli\/(keyring|prompt|password|secure-read|doctor[a-z-]*|key-server-url)\.js/,
  // sodium's addon comes from the require cache seeded by sodium-preload.ts, not through require-addon's resolver.
  /^require (require-addon|bare-addon-resolve|bare-module-resolve|bare-semver)$/,
];

test('`stash get` with a cached key loads only what it uses: no config, keyring, prompt, Koa or project addon', async () => {
  // Its own empty code cache, as a first run has: whether this run writes one does not hang on the run's warm copy.
  const t = cliEnv({ STASH_TEST_CODE_CACHE: undefined });
  try {
    await t.initVault(['work']);
    const set = await t.run(['set', 'work', 'TOKEN', '--password-file', t.pwFile], { input: 'tok-lean' });
    assert.is(set.code, 0, set.stderr);
    for (const via of ['bin', 'esm'] as const) {
      const r = recordLoads(['get', 'work', 'TOKEN'], t.env, via);
      assert.is(r.code, 0, r.stderr);
      assert.is(r.stdout, 'tok-lean', 'the value came from the cached key (no password source was given)');
      // The recorder works: the container and agent-client code were seen (the bundle: the addon the blocking client calls), and sodium's addon opened.
      if (via === 'bin')
        assert.ok(
          r.lines.some((l) => l.startsWith('dlopen ') && /stash_native|node\.napi/.test(l)),
          `recorder saw the agent client's addon: ${r.lines.join('\n')}`,
        );
      else {
        for (const m of ['/dist/cli/commands/entry.js', '/dist/vault/containers.js', '/dist/agent/client.js']) {
          assert.ok(
            r.lines.some((l) => l.startsWith('import ') && l.includes(m)),
            `recorder saw ${m}`,
          );
        }
      }
      // Nothing is spawned when the agent answers, and nothing hashes: child_process and crypto stay unloaded.
      assert.not.ok(
        r.lines.some((l) => /^(import|require) (node:)?(child_process|crypto)$/.test(l)),
        `${via}: get imported node:child_process or node:crypto`,
      );
      // sodium's, and the project's for the blocking agent client (src/agent/transport-blocking.ts).
      const dlopens = r.lines.filter((l) => l.startsWith('dlopen '));
      assert.equal(dlopens.length, 2, `${via}: only sodium's addon and ours are opened: ${dlopens.join(', ')}`);
      assert.ok(
        dlopens.some((l) => /sodium-native/.test(l)),
        `${via}: sodium's addon: ${dlopens.join(', ')}`,
      );
      for (const re of NOT_ON_GET_PATH)
        assert.not.ok(
          r.lines.some((l) => re.test(l)),
          `${via}: get loaded ${re}: ${r.lines.filter((l) => re.test(l)).join(', ')}`,
        );
    }
  } finally {
    await t.dispose();
  }
});

test("`stash get` with a cached key, help, usage errors and a write's note load neither node:net, node:tty nor the stream machinery (STASH_AGENT_TRANSPORT=net does)", async () => {
  const t = cliEnv({ STASH_TEST_CODE_CACHE: undefined }); // as the test above
  const dir = mkdtempSync(join(tmpdir(), 'stash-builtins-'));
  const record = join(dir, 'builtins.txt');
  const run = (args: string[], env: NodeJS.ProcessEnv = {}, input = '') => {
    const r = spawnSync(
      process.execPath,
      ['--require', join(process.cwd(), 'test', 'fixtures', 'builtins-at-exit.cjs'), stashBin, ...args],
      {
        encoding: 'utf8',
        input,
        env: { ...t.env, ...env, BUILTINS_RECORD: record },
        timeout: 20_000,
      },
    );
    return { ...r, loaded: readFileSync(record, 'utf8').split('\n').filter(Boolean) };
  };
  const builtins = (env: NodeJS.ProcessEnv): string[] => {
    const r = run(['get', 'work', 'TOKEN'], env);
    assert.is(r.status, 0, r.stderr);
    assert.is(r.stdout, 'tok-lean', 'the value, to a pipe, from the cached key');
    return r.loaded;
  };
  try {
    await t.initVault(['work']);
    const set = await t.run(['set', 'work', 'TOKEN', '--password-file', t.pwFile], { input: 'tok-lean' });
    assert.is(set.code, 0, set.stderr);
    const heavy = ['net', 'tty', 'stream', 'internal/stream_base_commons'];
    const lean = builtins({});
    assert.ok(lean.includes('fs'), `the record lists built-ins: ${lean.join(' ')}`);
    assert.equal(
      lean.filter((m) => heavy.includes(m)),
      [],
      'the blocking transport and the stdout written through descriptor 1',
    );
    // Nor does a command's text on stdout and stderr: help, a usage error, a write's note, the version, a
    // generated value.
    for (const [args, status, input, stream, text] of [
      [['--help'], 0, '', 'stdout', /^usage: stash <command>/m],
      [['frob'], 64, '', 'stderr', /^stash: unknown command 'frob'/],
      [['set', 'work', 'OTHER'], 0, 'other-value', 'stderr', /^Stored OTHER in work\.$/m],
      [['--version'], 0, '', 'stdout', /^stash \d+\.\d+\.\d+/],
      [['generate'], 0, '', 'stdout', /^\S{8,}$/], // no newline to a pipe: isatty(1) asked through the addon
    ] as const) {
      const r = run([...args], {}, input);
      assert.is(r.status, status, `${args.join(' ')}: ${r.stderr}`);
      assert.match(r[stream], text, `${args.join(' ')} wrote its text to ${stream}`);
      assert.equal(
        r.loaded.filter((m) => heavy.includes(m)),
        [],
        `${args.join(' ')}: its text written through descriptors 1 and 2`,
      );
    }
    const viaNet = builtins({ STASH_AGENT_TRANSPORT: 'net' });
    assert.ok(viaNet.includes('net'), `the same check sees node:net when the client uses it: ${viaNet.join(' ')}`);
    const bad = stash(['get', 'work', 'TOKEN'], { ...t.env, STASH_AGENT_TRANSPORT: 'fast' });
    assert.is(bad.code, 78, bad.stderr);
    assert.is(bad.stderr, 'stash: STASH_AGENT_TRANSPORT must be auto, blocking or net; got "fast"\n');
    assert.is(bad.stdout, '');
  } finally {
    rmSync(dir, { recursive: true, force: true });
    await t.dispose();
  }
});

test('sodium-preload seeds exactly the addon that require-addon would resolve', () => {
  const script = `
    import { createRequire } from 'node:module';
    import { preloadSodium } from './dist/cli/sodium-preload.js';
    const require = createRequire(import.meta.url);
    const took = preloadSodium();
    const binding = require.resolve('sodium-native/binding.js');
    const seeded = require.cache[binding]?.exports;
    const resolved = createRequire(binding)('require-addon')('.', binding);
    const sodium = require('sodium-native');
    const buf = sodium.sodium_malloc(8);
    console.log(JSON.stringify({ took, same: seeded === resolved, works: buf.secure === true, again: preloadSodium() }));`;
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8', timeout: 20_000 });
  assert.is(r.status, 0, r.stderr);
  const out = JSON.parse(r.stdout) as { took: boolean; same: boolean; works: boolean; again: boolean };
  if (process.platform === 'linux' && !existsSync('/etc/alpine-release'))
    assert.ok(out.took, 'the fast path is taken on Linux with glibc');
  if (out.took) assert.ok(out.same, 'the seeded binding is the addon require-addon resolves');
  assert.ok(out.works, 'sodium works after the preload');
  assert.is(out.again, false, 'a second call changes nothing');
});

test('every command has --help with its usage line and options, exit 0', () => {
  for (const c of commands) {
    const r = stash([...c.path, '--help']);
    assert.is(r.code, 0, `${c.path.join(' ')} --help: ${r.stderr}`);
    assert.ok(r.stdout.startsWith(`usage: stash ${c.path.join(' ')}`), r.stdout);
    for (const name of Object.keys(c.options))
      assert.ok(r.stdout.includes(`--${name}`), `${c.path.join(' ')} --help documents --${name}`);
    assert.ok(r.stdout.includes('-h, --help'));
  }
  const viaHelp = stash(['help', 'get']);
  assert.is(viaHelp.code, 0);
  assert.ok(viaHelp.stdout.startsWith('usage: stash get'));
});

test('unknown options, missing and extra arguments are usage errors (64) naming the problem', () => {
  const cases: Array<[string[], RegExp]> = [
    // [CONTAINER] may be left out (the default container): only PATH is missing.
    [['get'], /^stash: missing argument: PATH\nusage: stash get \[options\] \[CONTAINER\] PATH\n/],
    // Only what is missing is named.
    [['restore', 'c'], /^stash: missing argument: PATH\nusage: stash restore/],
    [['container', 'rename'], /^stash: missing arguments: OLD NEW\nusage: stash container rename/],
    [['get', 'c', 'N', 'extra'], /^stash: unexpected argument 'extra'\nusage: stash get/],
    // A word after a command without subcommands is a surplus argument, not an unknown command.
    [['doctor', 'extra'], /^stash: unexpected argument 'extra'\nusage: stash doctor/],
    [['container', 'list', 'x'], /^stash: unexpected argument 'x'\nusage: stash container list/],
    [['vault', 'init', 'x'], /^stash: unexpected argument 'x'\nusage: stash vault init/],
    [['get', '--frobnicate', 'c', 'N'], /^stash: unknown option '--frobnicate'\nusage: stash get/],
    [['container', 'list', '--json=yes'], /^stash: option '--json' does not take an argument/],
    [['open', 'c', '--ttl'], /^stash: option '--ttl <value>' argument missing/],
    [['env', 'c'], /^stash: missing -- CMD/],
    [['env', 'c', 'ls'], /^stash: missing -- CMD: put -- before the command to run/],
    // An unknown command is one line with a hint, not the whole help.
    [['frobnicate'], /^stash: unknown command 'frobnicate' \(see stash --help\)\n$/],
    [['gte', 'c', 'N'], /^stash: unknown command 'gte'; did you mean 'stash get'\? \(see stash --help\)\n$/],
    [
      ['vault', 'sessions', 'frob'],
      /^stash: unknown command 'vault sessions frob' \(see stash vault sessions --help\)\n$/,
    ],
    [['vault'], /^stash: missing command: 'stash vault' needs one of these\nusage: stash vault <command>/],
    [
      ['vault', '--bogus'],
      /^stash: unknown option '--bogus': 'stash vault' needs one of its commands first \(see stash vault --help\)\n$/,
    ],
    // Top-level options are named, with the nearest real one.
    [['--versoin'], /^stash: unknown option '--versoin'; did you mean '--version'\? \(see stash --help\)\n$/],
    [['--foo'], /^stash: unknown option '--foo' \(see stash --help\)\n$/],
    [['-x'], /^stash: unknown option '-x' \(see stash --help\)\n$/],
    [['--json'], /^stash: unknown option '--json' \(see stash --help\)\n$/],
    [['--version', 'extra'], /^stash: unexpected argument 'extra' after --version \(see stash --help\)\n$/],
    // A read is never turned into a write: cat is two edits from both get and set.
    [['cat', 'c', 'N'], /^stash: unknown command 'cat'; did you mean 'stash get'\? \(see stash --help\)\n$/],
    [['show', 'c', 'N'], /did you mean 'stash get'\?/],
    [['container', 'ls'], /^stash: unknown command 'container ls'; did you mean 'stash container list'\?/],
    [['sat', 'c', 'N'], /did you mean 'stash set'\?/], // one key off a write is still a slip
    [
      ['vault', 'sessions', 'lockall'],
      /did you mean 'stash vault sessions lock-all'\? \(see stash vault sessions --help\)/,
    ],
  ];
  for (const [args, re] of cases) {
    const r = stash(args);
    assert.is(r.code, 64, `${args.join(' ')}: ${r.stderr}`);
    assert.match(r.stderr, re);
    assert.is(r.stdout, '', 'usage errors print nothing on stdout');
  }
  const bare = stash([]);
  assert.is(bare.code, 64);
  assert.match(bare.stdout, /usage: stash <command>/);
});

test('a group that also runs by itself lists its subcommands in --help (vault sessions)', () => {
  const r = stash(['vault', 'sessions', '--help']);
  assert.is(r.code, 0, r.stderr);
  for (const sub of [
    'lock CONTAINER',
    'lock-all',
    'stop',
    'auto-unlock status',
    'auto-unlock enable',
    'auto-unlock disable',
    'auto-unlock forget',
  ]) {
    assert.match(r.stdout, new RegExp(`\\n  vault sessions ${sub} `), sub);
  }
  assert.match(r.stdout, /--json/);
  const leaf = stash(['vault', 'sessions', 'lock', '--help']);
  assert.not.match(leaf.stdout, /commands:/, 'a command without subcommands lists none');
});

test('--version of both executables prints the version of package.json', () => {
  const { version } = JSON.parse(readFileSync(join(process.cwd(), 'package.json'), 'utf8')) as { version: string };
  for (const flag of ['--version', '-V']) {
    const r = stash([flag]);
    assert.is(r.code, 0, r.stderr);
    assert.is(r.stdout, `stash ${version}\n`);
    const k = keyServer([flag]);
    assert.is(k.code, 0, k.stderr);
    assert.is(k.stdout, `stash_key_server ${version}\n`);
  }
});

test('every stash_key_server command has its own --help with only the options it accepts', () => {
  const commands = [
    'run',
    'install',
    'uninstall',
    'status',
    'resync-peer',
    'bench-store',
    'bench-http',
    'bench-http-fetch',
    'bench-http-flow',
  ];
  for (const c of commands) {
    for (const args of [
      [c, '--help'],
      [c, '-h'],
      ['help', c],
    ]) {
      const r = keyServer(args);
      assert.is(r.code, 0, `${args.join(' ')}: ${r.stderr}`);
      assert.ok(r.stdout.startsWith(`usage: stash_key_server ${c}`), `${args.join(' ')}: ${r.stdout}`);
      assert.ok(r.stdout.includes('--help'), r.stdout);
    }
  }
  const install = keyServer(['install', '--help']).stdout;
  assert.ok(install.includes('--force-config'));
  assert.not.ok(install.includes('--bind'), 'install does not take --bind, so its help does not list it');
  const run = keyServer(['run', '--help']).stdout;
  assert.ok(run.includes('--bind ADDR') && !run.includes('--purge-data'), run);
  for (const flag of ['--requests', '--payload-bytes', '--concurrency', '--preload-shares', '--json'])
    assert.not.ok(run.includes(flag), `run --help lists ${flag}`);
  assert.ok(keyServer(['bench-http', '--help']).stdout.includes('--requests N'));
  const refused = keyServer(['run', '--developer', '--requests', '5']);
  assert.is(refused.code, 64);
  assert.match(refused.stderr, /option --requests is not accepted by `run`/);
  // The general help still lists everything.
  const all = keyServer(['--help']);
  assert.is(all.code, 0);
  assert.ok(all.stdout.includes('--purge-data') && all.stdout.includes('--bind'));
  const unknown = keyServer(['help', 'frob']);
  assert.is(unknown.code, 64);
  assert.is(unknown.stderr, "stash_key_server: unknown command 'frob' (see stash_key_server --help)\n");
});

test('bad option values are refused before anything is asked', async () => {
  const t = cliEnv();
  try {
    for (const ttl of ['0', '-5', '1.5', 'abc', '9999999999']) {
      const r = await t.run(['open', 'c', `--ttl=${ttl}`]);
      assert.is(r.code, 64, `--ttl ${ttl}`);
      assert.match(r.stderr, /^stash: --ttl must be a whole number of seconds/);
    }
    const both = await t.run(['get', 'c', 'N', '--password-stdin', '--password-file', t.pwFile]);
    assert.is(both.code, 64);
    assert.match(both.stderr, /cannot be combined/);
    const badName = await t.run(['get', '../etc', 'N']);
    assert.is(badName.code, 64);
    assert.match(badName.stderr, /^stash: invalid container name "..\/etc"/);
    const kdf = await t.run(['vault', 'init', '--kdf', 'none', '--password-file', t.pwFile]);
    assert.is(kdf.code, 64);
    assert.match(kdf.stderr, /--kdf must be moderate or interactive/);
  } finally {
    await t.dispose();
  }
});

test('a missing vault is a clear error (66); no agent is started for it', async () => {
  const t = cliEnv();
  try {
    const r = await t.run(['get', 'c', 'N', '--password-file', t.pwFile]);
    assert.is(r.code, 66, r.stderr);
    assert.match(r.stderr, /^stash: no vault at .*vault \(.*vault\.json does not exist\); create one first\n$/);
    const list = await t.run(['container', 'list']);
    assert.is(list.code, 66);
    assert.equal(agentPids(t.dir), [], 'no agent was started');
  } finally {
    await t.dispose();
  }
});

test('NO_COLOR and pipes: no escape codes in doctor output', async () => {
  const t = await shared.fresh([]);
  const plain = await t.run(['doctor'], { env: { NO_COLOR: '1' } });
  assert.ok(plain.stdout.includes('[ ok ]'));
  assert.not.ok(plain.stdout.includes('\x1b['), 'no ANSI escapes');
  // A terminal with NO_COLOR set: still no colour.
  const tty = t.pty(['doctor'], [], { env: { NO_COLOR: '1' } });
  assert.ok(tty.output.includes('[ ok ]'));
  assert.not.ok(tty.output.includes('\x1b['), 'NO_COLOR honoured on a terminal');
  const colored = t.pty(['doctor'], []);
  assert.ok(colored.output.includes('\x1b[32m[ ok ]'), 'a terminal without NO_COLOR gets colour');
});

test.run();
