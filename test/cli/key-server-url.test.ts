/**
 * One key server URL rule for `--server`, STASH_KEY_SERVER_URL and
 * `key_server_url` (issue 16, item 8): credentials, queries and fragments are
 * refused the same way from all three (64 for the flag, 78 for the
 * environment and the file), and no message, `stash doctor` included, ever
 * prints the refused password.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ConfigError } from '../../src/errors.js';
import { generateShareCode } from '../../src/keyserver/share-code.js';
import { candidateServers } from '../../src/keyserver/routed-fetch.js';
import { checkKeyServerUrl, keyServerBase, keyServerUrlProblem, redactUrl } from '../../src/config/server-url.js';
import { parseShareCode } from '../../src/keyserver/share-code.js';
import { findKeyServerUrl } from '../../src/cli/key-server-url.js';
import { cliEnv, type CliEnv } from './harness.js';

const SECRET = 's3cretPW';
const BAD = [
  `https://user:${SECRET}@keys.example.org/?q`,
  `https://${SECRET}@keys.example.org`,
  `https://:${SECRET}@keys.example.org`,
  'https://@keys.example.org',
  `https://keys.example.org/?token=${SECRET}`,
  'https://keys.example.org/?',
  `https://keys.example.org/#${SECRET}`,
  'ftp://keys.example.org',
  'keys.example.org',
  'htps:/x',
];

test('the rule: base http(s) URLs pass (trailing slashes dropped); everything else is refused without echoing a secret', () => {
  assert.is(
    checkKeyServerUrl('https://keys.example.org/', 'x', (m) => new ConfigError(m)),
    'https://keys.example.org',
  );
  assert.is(
    checkKeyServerUrl('http://127.0.0.1:8089', 'x', (m) => new ConfigError(m)),
    'http://127.0.0.1:8089',
  );
  assert.is(
    checkKeyServerUrl('https://example.org/stash//', 'x', (m) => new ConfigError(m)),
    'https://example.org/stash',
  );
  for (const raw of BAD) {
    assert.ok(keyServerUrlProblem(raw) !== null, raw);
    try {
      checkKeyServerUrl(raw, 'STASH_KEY_SERVER_URL', (m) => new ConfigError(m));
      assert.unreachable(raw);
    } catch (err) {
      assert.instance(err, ConfigError);
      assert.not.ok((err as Error).message.includes(SECRET), (err as Error).message);
      assert.match((err as Error).message, /^STASH_KEY_SERVER_URL (must|has) /);
    }
  }
  assert.is(redactUrl(`https://u:${SECRET}@h/p?x=${SECRET}#${SECRET}`), 'https://***@h/p?***#***');
});

test('a topology entry that breaks the rule is passed over', () => {
  const code = parseShareCode(generateShareCode(0, 1).display);
  const list = candidateServers(
    {
      clusterId: 'c',
      topologyVersion: 1,
      routes: [],
      promotedOwners: [],
      servers: [
        { id: 0, url: `https://u:${SECRET}@a.example`, status: 'active' },
        { id: 1, url: 'https://b.example/', status: 'active' },
      ],
    } as never,
    code,
    'https://configured.example',
  );
  assert.equal(
    list.map((c) => c.url),
    ['https://b.example', 'https://configured.example'],
  );
});

test('a URL written as the /v1/share endpoint (as the spec words it) names the same server as its base', () => {
  const same: Array<[string, string]> = [
    ['https://keys.example.org', 'https://keys.example.org'],
    ['https://keys.example.org/', 'https://keys.example.org'],
    ['https://keys.example.org/v1/share', 'https://keys.example.org'],
    ['https://keys.example.org/v1/share/', 'https://keys.example.org'],
    ['https://keys.example.org:8443/stash/v1/share', 'https://keys.example.org:8443/stash'],
    ['http://127.0.0.1:8089/v1/share', 'http://127.0.0.1:8089'],
    // Only a whole final path segment pair: these are other paths, and `v1` here is a host name.
    ['https://keys.example.org/v1/shares', 'https://keys.example.org/v1/shares'],
    ['https://keys.example.org/xv1/share', 'https://keys.example.org/xv1/share'],
    ['http://v1/share', 'http://v1/share'],
  ];
  for (const [raw, base] of same) {
    assert.is(keyServerBase(raw), base, raw);
    assert.is(
      checkKeyServerUrl(raw, 'x', (m) => new ConfigError(m)),
      base,
      raw,
    );
  }
  // The rule is the same for both spellings.
  assert.ok(keyServerUrlProblem(`https://u:${SECRET}@keys.example.org/v1/share`) !== null);
  assert.ok(keyServerUrlProblem('https://keys.example.org/v1/share?x') !== null);
  // Topology entries and configured URLs written either way are one candidate each, as the base.
  const code = parseShareCode(generateShareCode(0, 1).display);
  const list = candidateServers(
    {
      clusterId: 'c',
      topologyVersion: 1,
      routes: [{ owner: 0, primary: 0, failovers: [1] }],
      promotedOwners: [],
      serverId: 0,
      servers: [
        { id: 0, url: 'https://a.example/v1/share', status: 'active' },
        { id: 1, url: 'https://b.example/v1/share/', status: 'active' },
      ],
    },
    code,
    ['https://a.example/', 'https://b.example/v1/share', 'https://c.example/v1/share'],
  );
  assert.equal(list, [
    { id: 0, url: 'https://a.example' },
    { id: 1, url: 'https://b.example' },
    { id: null, url: 'https://c.example' },
  ]);
});

let t: CliEnv;
let fingerprint: string;
const code = generateShareCode(0, 0).display;

test.before(async () => {
  t = cliEnv();
  await t.initVault();
  fingerprint = (JSON.parse((await t.run(['vault', 'identity', 'show', '--json'])).stdout) as { fingerprint: string })
    .fingerprint;
});

test.after(async () => {
  await t.dispose();
});

const receive = (args: string[], env: NodeJS.ProcessEnv = {}) =>
  t.run(['vault', 'contact', 'receive', code, '--fingerprint', fingerprint, ...args], {
    env: { STASH_PASSWORD_FILE: t.pwFile, ...env },
  });

test('all three sources refuse user:pw@ and ?query alike; the password is never printed', async () => {
  const url = `https://user:${SECRET}@keys.example.org/?q=${SECRET}`;
  const flag = await receive(['--server', url]);
  assert.is(flag.code, 64, flag.stderr);
  assert.is(
    flag.stderr,
    'stash: --server must not hold a user name or password (the key server needs none); got "https://***@keys.example.org/?***"\n',
  );

  const env = await receive([], { STASH_KEY_SERVER_URL: url });
  assert.is(env.code, 78, env.stderr);
  assert.is(
    env.stderr,
    'stash: STASH_KEY_SERVER_URL must not hold a user name or password (the key server needs none); got "https://***@keys.example.org/?***"\n',
  );

  for (const args of [['doctor'], ['doctor', '--json']]) {
    const doctor = await t.run(args, { env: { STASH_KEY_SERVER_URL: url } });
    assert.not.ok(
      `${doctor.stdout}${doctor.stderr}`.includes(SECRET),
      `${args.join(' ')} never prints the password:\n${doctor.stdout}`,
    );
    assert.ok(doctor.stdout.includes('https://***@keys.example.org'), doctor.stdout);
  }

  const dir = join(t.env.XDG_CONFIG_HOME!, 'stash');
  mkdirSync(dir, { recursive: true });
  const file = join(dir, 'config.toml');
  writeFileSync(file, `# keys\nkey_server_url = "https://keys.example.org/?token=${SECRET}"\n`);
  try {
    const fromFile = await receive([]);
    assert.is(fromFile.code, 78, fromFile.stderr);
    assert.is(
      fromFile.stderr,
      `stash: ${file}:2: key_server_url must be a base URL without a query or fragment; got "https://keys.example.org/?***"\n`,
    );
    const doctor = await t.run(['doctor']);
    assert.not.ok(doctor.stdout.includes(SECRET), doctor.stdout);
  } finally {
    writeFileSync(file, '');
  }
});

test('the same base URL is accepted from each source', async () => {
  // Nothing listens on port 9 of loopback: each source gets as far as the request.
  for (const [args, env] of [
    [['--server', 'http://127.0.0.1:9/'], {}],
    [[], { STASH_KEY_SERVER_URL: 'http://127.0.0.1:9/' }],
  ] as Array<[string[], NodeJS.ProcessEnv]>) {
    const r = await receive(args, env);
    assert.is(r.code, 69, r.stderr);
    assert.match(r.stderr, /cannot reach the key server at http:\/\/127\.0\.0\.1:9/);
  }
});

test('the /v1/share spelling from each source: the flag, the environment and the config file all give the base', async () => {
  assert.equal(await findKeyServerUrl({ server: 'http://127.0.0.1:9/v1/share' }, {}), {
    url: 'http://127.0.0.1:9',
    from: '--server',
  });
  const dir = join(t.env.XDG_CONFIG_HOME!, 'stash');
  mkdirSync(dir, { recursive: true });
  const file = join(dir, 'config.toml');
  writeFileSync(file, 'key_server_url = "http://127.0.0.1:9/v1/share"\n');
  try {
    for (const env of [{ STASH_KEY_SERVER_URL: 'http://127.0.0.1:9/v1/share/' }, {}]) {
      const doctor = await t.run(['doctor', '--json'], { env });
      const ks = (JSON.parse(doctor.stdout) as { keyServer: { url: string; from: string } }).keyServer;
      assert.is(ks.url, 'http://127.0.0.1:9', `${ks.from}: ${doctor.stdout}`);
    }
  } finally {
    writeFileSync(file, '');
  }
});

test.run();
