/**
 * The project's build tools run on the Node line that runs this suite (CI runs
 * test/native under every supported line): node-gyp, pointed at a closed local
 * port for headers with no nodedir configured anywhere, fails with a connection
 * error, never a TypeError (node-gyp 13's undici crashed on Node 20); and the
 * install script finds this Node's own headers beside it, so a build needs no
 * download at all.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

const require = createRequire(join(process.cwd(), 'package.json'));

/** A loopback port that nothing listens on (taken, then released). */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as { port: number };
  await new Promise<void>((r) => server.close(() => r()));
  return port;
}

test(`node-gyp on Node ${process.version}, headers from a closed port: a connection error, not a crash`, async () => {
  const home = mkdtempSync(join(tmpdir(), 'stash-gyp-home-'));
  const devdir = mkdtempSync(join(tmpdir(), 'stash-gyp-dev-'));
  try {
    const port = await closedPort();
    const env: NodeJS.ProcessEnv = { ...process.env, HOME: home };
    for (const k of Object.keys(env)) if (/^npm_config_/i.test(k)) delete env[k];
    const nodeGyp = require.resolve('node-gyp/bin/node-gyp.js');
    const r = spawnSync(
      process.execPath,
      [nodeGyp, 'install', '--devdir', devdir, '--dist-url', `http://127.0.0.1:${port}/`],
      { env, encoding: 'utf8', timeout: 60_000 },
    );
    const out = `${r.stdout}${r.stderr}`;
    assert.is.not(r.status, 0, out);
    assert.match(out, new RegExp(`ECONNREFUSED 127\\.0\\.0\\.1:${port}`), out);
    assert.not.match(out, /TypeError/, out);
  } finally {
    rmSync(home, { recursive: true, force: true });
    rmSync(devdir, { recursive: true, force: true });
  }
});

test("the install script finds the running Node's headers beside it (no download needed)", async () => {
  const { localHeaders } = (await import(pathToFileURL(resolve('scripts/install-addon.js')).href)) as {
    localHeaders?: (p: string) => string | null;
  };
  assert.type(localHeaders, 'function');
  const prefix = resolve(dirname(process.execPath), '..');
  const expected = existsSync(join(prefix, 'include', 'node', 'node_api.h')) ? prefix : null;
  assert.is(localHeaders!(process.execPath), expected);
  if (expected) {
    // The headers are this Node's own: node_version.h names the running version.
    const h = readFileSync(join(prefix, 'include', 'node', 'node_version.h'), 'utf8');
    const [major, minor, patch] = process.versions.node.split('.');
    assert.match(h, new RegExp(`#define NODE_MAJOR_VERSION ${major}\\b`));
    assert.match(h, new RegExp(`#define NODE_MINOR_VERSION ${minor}\\b`));
    assert.match(h, new RegExp(`#define NODE_PATCH_VERSION ${patch}\\b`));
  }
  assert.is(localHeaders!('/nonexistent/bin/node'), null);
});

test.run();
