/**
 * The prebuilt path: `npm run prebuild` + `npm pack`, then install the tarball
 * into a temporary folder with no compiler on PATH and load the addon from it.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';

const root = process.cwd();
const npmCli = join(dirname(process.execPath), '..', 'lib', 'node_modules', 'npm', 'bin', 'npm-cli.js');

function run(cmd: string, args: string[], opts: { cwd?: string; env?: NodeJS.ProcessEnv } = {}): { stdout: string } {
  const r = spawnSync(cmd, args, { ...opts, encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} failed (${r.status}):\n${r.stdout}\n${r.stderr}`);
  return { stdout: r.stdout };
}

test('the packed package loads its addon from prebuilds/ with no compiler on PATH', () => {
  const work = mkdtempSync(join(tmpdir(), 'stash-prebuild-'));
  try {
    run('npm', ['run', 'prebuild'], { cwd: root });
    const prebuildDir = join(root, 'prebuilds', `${process.platform}-${process.arch}`);
    const built = readdirSync(prebuildDir).filter((f) => f.endsWith('.node'));
    assert.ok(built.length === 1, `expected one prebuild, found ${built.join(', ')}`);

    const pack = run('npm', ['pack', '--json', '--pack-destination', work], { cwd: root });
    const info = JSON.parse(pack.stdout) as Array<{ filename: string; files: Array<{ path: string }> }>;
    const tarball = join(work, info[0]!.filename);
    const packed = info[0]!.files.map((f) => f.path);
    assert.ok(packed.some((p) => p.startsWith(`prebuilds/${process.platform}-${process.arch}/`)), 'prebuild is in the tarball');
    assert.ok(!packed.some((p) => p.startsWith('build/')), 'no build/ output in the tarball');
    assert.ok(packed.includes('dist/cli/main.js'), 'compiled CLI is in the tarball');

    // A PATH with node and a shell only: no cc, c++, g++, make or python.
    const bin = join(work, 'bin');
    mkdirSync(bin);
    symlinkSync(process.execPath, join(bin, 'node'));
    symlinkSync('/bin/sh', join(bin, 'sh'));
    const env = { ...process.env, PATH: bin, npm_config_nodedir: '', npm_config_update_notifier: 'false' };
    for (const compiler of ['cc', 'c++', 'g++', 'make', 'python3']) {
      assert.is.not(spawnSync('sh', ['-c', `command -v ${compiler}`], { env }).status, 0, `${compiler} must not be on PATH`);
    }
    const app = join(work, 'app');
    mkdirSync(app);
    writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'app', version: '1.0.0', private: true }));
    run(process.execPath, [npmCli, 'install', '--no-audit', '--no-fund', '--prefer-offline', tarball], { cwd: app, env });
    const pkg = join(app, 'node_modules', 'stash');
    assert.ok(!existsSync(join(pkg, 'build')), 'nothing was compiled at install');

    // The package's own loader resolves the addon from prebuilds/.
    const probe = run(process.execPath, [
      '--input-type=module', '-e',
      `const b = await import(${JSON.stringify(join(pkg, 'dist', 'native', 'binding.js'))});
       const binding = b.loadBinding();
       console.log(JSON.stringify({ platform: binding.platform, posture: binding.processPosture() }));
       const gyp = (await import('node:module')).createRequire(${JSON.stringify(join(pkg, 'package.json'))})('node-gyp-build');
       console.log(gyp.resolve(${JSON.stringify(pkg)}));`,
    ], { cwd: app, env });
    const [first, resolved] = probe.stdout.trim().split('\n');
    assert.is(JSON.parse(first!).platform, process.platform);
    assert.match(resolved!, new RegExp(`prebuilds/${process.platform}-${process.arch}/`));

    const help = run(process.execPath, [join(pkg, 'bin', 'stash.js'), '--help'], { cwd: app, env });
    assert.match(help.stdout, /usage: stash/);
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
});

test.run();
