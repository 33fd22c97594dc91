/**
 * Operator mistakes get sentences that name the fix (issue 16, item 11):
 * a --tls-cert/--tls-key that is not PEM (or a key of another certificate)
 * names its file and exits 78; an unprivileged `run` without --state-dir
 * points at --state-dir and --developer instead of a raw EACCES; a client
 * speaking https:// to a plain-http port is told the server does not speak TLS.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { execFileSync, spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { topology } from '../../src/keyserver/client.js';
import { haveCommand, needFacility } from '../helpers/facility.js';
import { asNobody, readableCopy } from '../helpers/readable-copy.js';
import { cliEnv } from '../cli/harness.js';
import { tempDir } from './harness.js';

const serverBin = join(process.cwd(), 'bin', 'stash_key_server.js');

function runServer(args: string[], opts: { asNobody?: boolean } = {}): { status: number | null; stderr: string } {
  // As nobody, from a readable copy of the compiled package: nobody may not be able to enter the checkout.
  const copy = opts.asNobody ? readableCopy([], { dependencies: true }) : null;
  try {
    const argv = copy
      ? [...asNobody, copy.node, join(copy.root, 'bin', 'stash_key_server.js'), 'run', '--bind', '127.0.0.1:0', ...args]
      : [process.execPath, serverBin, 'run', '--bind', '127.0.0.1:0', ...args];
    const r = spawnSync(argv[0]!, argv.slice(1), { encoding: 'utf8', timeout: 30_000 });
    return { status: r.status, stderr: r.stderr };
  } finally {
    copy?.remove();
  }
}

test('--tls-cert / --tls-key that are not PEM, or do not belong together: the file is named, exit 78', () => {
  if (!needFacility(haveCommand('openssl'), 'openssl', 'needed to make test certificates (apt-get install openssl)'))
    return;
  const dir = tempDir('tls-errors');
  try {
    const openssl = (...args: string[]) =>
      execFileSync('openssl', args, { cwd: dir.path, stdio: ['ignore', 'ignore', 'pipe'] });
    const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
    openssl('req', '-x509', ...ec, '-keyout', 'key.pem', '-out', 'cert.pem', '-days', '1', '-subj', '/CN=127.0.0.1');
    openssl('req', '-x509', ...ec, '-keyout', 'other.key', '-out', 'other.pem', '-days', '1', '-subj', '/CN=other');
    openssl('x509', '-in', 'cert.pem', '-outform', 'DER', '-out', 'cert.der');
    writeFileSync(join(dir.path, 'notes.txt'), 'this is not a certificate\n');
    const p = (name: string) => join(dir.path, name);
    const state = ['--state-dir', p('state')];
    const cases: Array<[string[], RegExp]> = [
      [
        ['--tls-cert', p('notes.txt'), '--tls-key', p('key.pem')],
        new RegExp(`^stash_key_server: --tls-cert ${p('notes.txt')}: not a PEM certificate`),
      ],
      [
        ['--tls-cert', p('cert.der'), '--tls-key', p('key.pem')],
        new RegExp(`^stash_key_server: --tls-cert ${p('cert.der')}: not a PEM certificate`),
      ],
      [
        ['--tls-cert', p('cert.pem'), '--tls-key', p('notes.txt')],
        new RegExp(`^stash_key_server: --tls-key ${p('notes.txt')}: not an unencrypted PEM private key`),
      ],
      [
        ['--tls-cert', p('cert.pem'), '--tls-key', p('cert.pem')],
        new RegExp(`^stash_key_server: --tls-key ${p('cert.pem')}: not an unencrypted PEM private key`),
      ],
      [
        ['--tls-cert', p('cert.pem'), '--tls-key', p('other.key')],
        new RegExp(
          `^stash_key_server: --tls-key ${p('other.key')} is not the private key of the certificate in --tls-cert ${p('cert.pem')}\\n$`,
        ),
      ],
    ];
    for (const [args, message] of cases) {
      const r = runServer([...args, ...state]);
      assert.is(r.status, 78, `${args.join(' ')}: ${r.stderr}`);
      assert.match(r.stderr, message);
      assert.is(r.stderr.trim().split('\n').length, 1, r.stderr);
    }
  } finally {
    dir.remove();
  }
});

test('an unprivileged run without --state-dir: says to use --state-dir or --developer (exit 77)', () => {
  if (process.getuid?.() !== 0) {
    if (!needFacility(false, 'root', 'this test runs the server as nobody through setpriv')) return;
  }
  if (!needFacility(haveCommand('setpriv'), 'setpriv', 'apt-get install util-linux')) return;
  const r = runServer([], { asNobody: true });
  assert.is(r.status, 77, r.stderr);
  const last = r.stderr.trim().split('\n').pop()!;
  assert.match(
    last,
    /^stash_key_server: cannot use the state folder \/var\/lib\/stash-key-server: permission denied \(.*\); it is the installed service's folder; give --state-dir PATH for a folder of your own, or --developer for a throwaway one$/,
  );
});

test('https:// to a plain-http port: "does not speak TLS", from the client and the CLI', async () => {
  const plain = createServer((_req, res) => res.end('hello'));
  await new Promise<void>((ok) => plain.listen(0, '127.0.0.1', ok));
  const url = `https://127.0.0.1:${(plain.address() as AddressInfo).port}`;
  const t = cliEnv();
  try {
    try {
      await topology(url, { timeoutMs: 5000 });
      assert.unreachable('a plain-http server answered over TLS');
    } catch (err) {
      assert.is((err as { code?: string }).code, 'SERVER_PROTOCOL', (err as Error).message);
      assert.is(
        (err as Error).message,
        `the server at ${url} does not speak TLS (is it a plain http:// server? then use http://${url.slice(8)})`,
      );
    }
    await t.initVault();
    const r = await t.run([
      'vault',
      'identity',
      'publish',
      '--email',
      'a@example.org',
      '--server',
      url,
      '--password-file',
      t.pwFile,
    ]);
    assert.is(r.code, 76, r.stderr);
    assert.is(
      r.stderr,
      `stash: the server at ${url} does not speak TLS (is it a plain http:// server? then use http://${url.slice(8)})\n`,
    );
  } finally {
    await t.dispose();
    await new Promise((done) => plain.close(done));
  }
});

test.run();
