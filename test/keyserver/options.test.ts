import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { writeFileSync } from 'node:fs';
import { TOKEN_FLAG_WARNING, parseCommandLine, type Invocation } from '../../src/keyserver/cli/parse.js';
import { optionDefs } from '../../src/keyserver/cli/options.js';
import type { ServerConfig } from '../../src/keyserver/server-config.js';
import { helpText } from '../../src/keyserver/cli/help.js';
import { tsNode } from '../helpers/facility.js';
import { startServerProcess } from './cluster.js';
import { tempDir } from './harness.js';

const files: Record<string, string> = {};
const reader = (p: string): string => {
  const text = files[p];
  if (text === undefined) throw Object.assign(new Error('nope'), { code: 'ENOENT' });
  return text;
};

function config(argv: string[]): ServerConfig {
  const inv: Invocation = parseCommandLine(argv, reader);
  if (inv.command === 'help') throw new Error('unexpected help');
  return inv.config;
}

function fails(argv: string[], pattern: RegExp): void {
  try {
    parseCommandLine(argv, reader);
  } catch (err) {
    assert.is((err as { code?: string }).code, 'USAGE', `code for ${argv.join(' ')}`);
    assert.match((err as Error).message, pattern, `message for ${argv.join(' ')}`);
    return;
  }
  assert.unreachable(`accepted: ${argv.join(' ')}`);
}

test('no argument and bare options mean run with the spec defaults', () => {
  for (const argv of [[], ['run'], ['--bind', '127.0.0.1:8089']]) {
    const inv = parseCommandLine(argv, reader);
    assert.is(inv.command, 'run');
  }
  const c = config([]);
  assert.equal(c.bind, { host: '127.0.0.1', port: 8089 });
  assert.is(c.stateDir, '/var/lib/stash-key-server');
  assert.is(c.serverId, 0);
  assert.is(c.clusterId, 'default');
  assert.is(c.topologyVersion, 1);
  assert.is(c.requests, 50000);
  assert.is(c.payloadBytes, 512);
  assert.is(c.compactMinBytes, 67108864);
  assert.is(c.rateLimitPerMinute, 120);
  assert.is(c.rateLimitBurst, 40);
  assert.is(c.verificationEmailRateLimitPerHour, 5);
  assert.is(c.verificationEmailIpRateLimitPerHour, 30);
  assert.is(c.shareTtlSeconds, 900);
  assert.is(c.trustProxy, false);
  assert.is(c.developer, false);
  assert.is(c.originEpoch, undefined);
});

test('help forms', () => {
  for (const argv of [['help'], ['--help'], ['-h'], ['run', '--help'], ['run', '--bind', 'x:1', '-h']]) {
    assert.is(parseCommandLine(argv, reader).command, 'help', argv.join(' '));
  }
  // A command's own help names it; the general help names none.
  assert.equal(parseCommandLine(['run', '--help'], reader), { command: 'help', topic: 'run' });
  assert.equal(parseCommandLine(['help', 'status'], reader), { command: 'help', topic: 'status' });
  assert.equal(parseCommandLine(['--bind', 'x:1', '-h'], reader), { command: 'help' });
  assert.equal(parseCommandLine(['--help'], reader), { command: 'help' });
});

test('every option is in the help text', () => {
  const text = helpText();
  for (const d of optionDefs) assert.ok(text.includes(`--${d.flag}`), d.flag);
  for (const cmd of ['run', 'install', 'uninstall', 'status', 'resync-peer', 'bench-store', 'bench-http-flow']) {
    assert.ok(text.includes(cmd), cmd);
  }
});

test('every value option parses in both flag forms', () => {
  const c = config([
    'run',
    '--bind=[::1]:0',
    '--state-dir',
    '/tmp/x',
    '--server-id',
    '9',
    '--cluster-id',
    'eu-1',
    '--public-url',
    'https://keys.example.org/',
    '--topology-version',
    '7',
    '--topology-server',
    '0=https://a.example.org,active',
    '--topology-server',
    '1=https://b.example.org/,standby',
    '--route',
    '0=0,1',
    '--route',
    '1=1',
    '--promoted-owner',
    '1',
    '--promoted-owner',
    '1',
    '--replication-token',
    'x'.repeat(32),
    '--replication-peer-url',
    'https://b.example.org/v1/replicate',
    '--origin-epoch',
    '1700000000000',
    '--compact-min-bytes',
    '8192',
    '--rate-limit-per-minute',
    '0',
    '--rate-limit-burst',
    '5',
    '--verification-email-command',
    '/usr/local/bin/mail-link',
    '--verification-email-rate-limit-per-hour',
    '2',
    '--verification-email-ip-rate-limit-per-hour',
    '3',
    '--tls-cert',
    '/c.pem',
    '--tls-key',
    '/k.pem',
    '--share-ttl',
    '3600',
    '--trust-proxy',
    '--developer',
    '--processes',
    '3',
  ]);
  assert.equal(c.bind, { host: '::1', port: 0 });
  assert.is(c.serverId, 9);
  assert.is(c.publicUrl, 'https://keys.example.org');
  assert.equal(c.topologyServers, [
    { id: 0, url: 'https://a.example.org', status: 'active' },
    { id: 1, url: 'https://b.example.org', status: 'standby' },
  ]);
  assert.equal(c.routes, [
    { owner: 0, primary: 0, failovers: [1] },
    { owner: 1, primary: 1, failovers: [] },
  ]);
  assert.equal(c.promotedOwners, [1]);
  assert.is(c.originEpoch, 1700000000000);
  assert.is(c.compactMinBytes, 8192);
  assert.is(c.rateLimitPerMinute, 0);
  assert.is(c.shareTtlSeconds, 3600);
  assert.is(c.trustProxy, true);
  assert.is(c.developer, true);
  assert.is(c.tlsKey, '/k.pem');
  assert.is(c.processes, 3);
  assert.is(config(['run', '--processes', 'auto']).processes, 'auto');
  assert.is(config(['run']).processes, 1);
  assert.throws(() => config(['run', '--processes', '0']), /--processes must be 1\.\.64, got 0/);
});

test('config files are read first, later files win, flags override, repeatables merge by id', () => {
  files['/a.conf'] = [
    '# the first file',
    'bind_addr = 127.0.0.1:9000   # trailing comment',
    'state_dir = "/srv/state # not a comment"',
    'server_id = 1',
    'topology_server = ["0=https://a.example.org", "1=https://b.example.org,standby"]',
    'route = 0=0,1',
    'route = 1=1,0',
    'developer = false',
    'promoted_owner = 0',
  ].join('\n');
  files['/b.conf'] = 'server_id = 2\ntopology_server = "1=https://b2.example.org,active"\n';
  const c = config([
    '--config',
    '/a.conf',
    '--config=/b.conf',
    '--server-id',
    '3',
    '--route',
    '1=1',
    '--promoted-owner',
    '1',
  ]);
  assert.equal(c.bind, { host: '127.0.0.1', port: 9000 });
  assert.is(c.stateDir, '/srv/state # not a comment');
  assert.is(c.serverId, 3);
  assert.equal(
    c.topologyServers.map((s) => `${s.id} ${s.url} ${s.status}`),
    ['0 https://a.example.org active', '1 https://b2.example.org active'],
  );
  assert.equal(c.routes, [
    { owner: 0, primary: 0, failovers: [1] },
    { owner: 1, primary: 1, failovers: [] },
  ]);
  assert.equal(c.promotedOwners, [0, 1]);
});

test("--public-url and --topology-server URLs written as the /v1/share endpoint (the spec's words) are kept as the base", () => {
  const c = config([
    '--public-url',
    'https://keys.example.org/v1/share',
    '--topology-server',
    '0=https://a.example.org/v1/share,active',
    '--topology-server',
    '1=https://b.example.org:8443/stash/v1/share/,standby',
    '--replication-peer-url',
    'https://b.example.org/v1/replicate',
  ]);
  assert.is(c.publicUrl, 'https://keys.example.org');
  assert.equal(
    c.topologyServers.map((s) => `${s.id} ${s.url} ${s.status}`),
    ['0 https://a.example.org active', '1 https://b.example.org:8443/stash standby'],
  );
  assert.equal(
    c.replicationPeerUrls,
    ['https://b.example.org/v1/replicate'],
    'a replication URL names its endpoint and is left alone',
  );
  files['/spelled.conf'] =
    'public_url = "https://keys.example.org/v1/share"\ntopology_server = ["0=https://a.example.org/v1/share", "1=https://b.example.org,standby"]\n';
  const f = config(['--config', '/spelled.conf']);
  assert.is(f.publicUrl, 'https://keys.example.org');
  assert.equal(
    f.topologyServers.map((s) => s.url),
    ['https://a.example.org', 'https://b.example.org'],
  );
});

test('command-line errors name the option', () => {
  fails(['--nope'], /unknown option: --nope/);
  fails(['run', 'extra'], /unexpected argument: "extra"/);
  fails(['frobnicate'], /unknown command 'frobnicate'/);
  fails(['--bind'], /--bind needs a value/);
  fails(['--bind', '--developer'], /--bind needs a value/);
  fails(['--developer=yes'], /--developer takes no value/);
  fails(['--server-id', '1', '--server-id', '2'], /--server-id is given twice/);
  fails(['--server-id', '10'], /--server-id must be 0\.\.9, got 10/);
  fails(['--server-id', '-1'], /--server-id must be a whole number, got "-1"/);
  fails(['--server-id', '1.5'], /--server-id must be a whole number/);
  fails(['--topology-version', 'x'], /--topology-version must be a whole number, got "x"/);
  fails(['bench-http', '--requests', '0'], /--requests must be at least 1, got 0/);
  // The benchmark options belong to bench-* alone: run refuses them, and its help does not list them.
  for (const flag of ['--requests', '--payload-bytes', '--concurrency', '--preload-shares']) {
    fails(['run', '--developer', flag, '5'], new RegExp(`option ${flag} is not accepted by \`run\``));
  }
  const bench = config([
    'bench-http',
    '--requests',
    '10',
    '--payload-bytes',
    '0',
    '--concurrency',
    '4',
    '--preload-shares',
    '100',
  ]);
  assert.equal([bench.requests, bench.payloadBytes, bench.concurrency, bench.preloadShares], [10, 0, 4, 100]);
  fails(['--compact-min-bytes', '99999999999999999999'], /--compact-min-bytes must be a whole number/);
  fails(['--rate-limit-burst', '0'], /--rate-limit-burst must be 1\.\.1000000/);
  fails(['--share-ttl', '5'], /--share-ttl must be 60\.\.34560000, got 5/);
  fails(['--origin-epoch', 'now'], /--origin-epoch must be a whole number/);
  fails(['--public-url', 'keys.example.org'], /--public-url must be an absolute http:\/\/ or https:\/\/ URL/);
  fails(['--public-url', 'ftp://keys.example.org'], /--public-url must use http:\/\/ or https:\/\//);
  fails(['--public-url', 'https://u:p@keys.example.org'], /--public-url must not contain a user name/);
  fails(['--public-url', 'https://keys.example.org/?a=1'], /--public-url must not contain a query/);
  fails(['--replication-peer-url', 'nope'], /--replication-peer-url must be an absolute/);
  fails(['--bind', 'localhost'], /--bind must be HOST:PORT/);
  fails(['--bind', '127.0.0.1:70000'], /--bind port must be 0\.\.65535/);
  fails(['--bind', '300.1.1.1:80'], /--bind has an invalid IPv4 address/);
  fails(['--route', '1='], /--route has no primary server id/);
  fails(['--route', '1'], /--route must be OWNER=PRIMARY/);
  fails(['--route', '1=2,,3'], /--route has an empty failover id/);
  fails(['--route', '1=2,2'], /--route names a server twice/);
  fails(['--route', '1=x'], /--route primary id must be a whole number/);
  fails(['--route', '12=1'], /--route owner id must be 0\.\.9/);
  fails(['--topology-server', 'https://a.example.org'], /--topology-server must be ID=URL\[,STATUS\]/);
  fails(
    ['--topology-server', '1=https://a.example.org,sleeping'],
    /--topology-server status must be one of active, standby, promoted, disabled, got "sleeping"/,
  );
  fails(['--topology-server', '1=,active'], /--topology-server has no URL/);
  fails(['--topology-server', '1=nope'], /--topology-server URL must be an absolute/);
  fails(
    ['--topology-server', '0=https://a.example.org', '--route', '0=0,5'],
    /--route 0=0,5: server 5 is not a --topology-server entry/,
  );
  fails(['--promoted-owner', '11'], /--promoted-owner must be 0\.\.9/);
  fails(['--cluster-id', 'a b'], /--cluster-id must be 1-64 characters/);
  fails(['--replication-token', 'short'], /--replication-token must be at least 16 characters/);
  fails(['--tls-cert', '/c.pem'], /--tls-cert and --tls-key must be given together/);
  fails(['--tls-key', '/k.pem'], /--tls-cert and --tls-key must be given together/);
  fails(['--state-dir', ''], /--state-dir must not be empty/);
  fails(['--config', '/missing.conf'], /--config \/missing\.conf: cannot read the file \(ENOENT\)/);
  fails(['resync-peer'], /resync-peer needs --peer-url/);
  fails(['run', '--peer-url', 'https://b.example.org/v1/replicate'], /option --peer-url is not accepted by `run`/);
  fails(['install', '--bind', '1.2.3.4:5'], /option --bind is not accepted by `install`/);
  fails(['status', '--purge-data'], /option --purge-data is not accepted by `status`/);
  fails(['--help', 'x'], /unexpected argument after --help/);
});

test('config-file errors carry file:line and the key', () => {
  const cases: Array<[string, RegExp]> = [
    ['server_id = 12', /\/e\.conf:1: server_id must be 0\.\.9, got 12/],
    ['\n\nnope = 1', /\/e\.conf:3: unknown key "nope"/],
    ['server-id = 1', /unknown key "server-id" \(config keys use underscores: server_id\)/],
    ['bind = 127.0.0.1:1', /\/e\.conf:1: unknown key "bind" \(the config key of --bind is bind_addr\)/],
    ['config = /x', /unknown key "config"/],
    ['peer_url = https://x.org', /unknown key "peer_url"/],
    ['just words', /\/e\.conf:1: expected key = value \(the line starts with "just"\)/],
    // A typo on a secret's line must not put the secret in the error (errors reach the service log).
    [
      'replication_token: "tok-SECRET-0123456789abcdef"',
      /^(?![\s\S]*SECRET)[\s\S]*expected key = value \(the line starts with "replication_token"\)/,
    ],
    [
      'replication_token = "tok-0123456789abcdef" SECRET-TAIL',
      /^(?![\s\S]*SECRET)[\s\S]*replication_token: unexpected text after the value \(not shown/,
    ],
    ['[server]', /sections are not supported/],
    ['route = 1=', /\/e\.conf:1: route has no primary server id/],
    ['topology_server = 1=https://a.org,broken', /\/e\.conf:1: topology_server status must be one of/],
    ['server_id = 1\nserver_id = 2', /\/e\.conf:2: server_id is given twice \(first on line 1\)/],
    ['server_id = ', /\/e\.conf:1: server_id needs a value/],
    ['server_id = [1, 2]', /server_id takes one value, not a list/],
    ['state_dir = "/x', /unterminated quoted value/],
    ['state_dir = "/x" y', /unexpected text after the value/],
    ['route = ["0=0"', /unterminated list/],
    ['developer = maybe', /\/e\.conf:1: developer must be true or false, got "maybe"/],
    ['public_url = nope', /\/e\.conf:1: public_url must be an absolute/],
  ];
  for (const [text, pattern] of cases) {
    files['/e.conf'] = text;
    fails(['--config', '/e.conf'], pattern);
  }
});

test('the real entry: --help does not load koa, errors exit 64, usage errors of the operator commands exit 64', () => {
  const fixture = join(process.cwd(), 'test', 'fixtures', 'keyserver-main.ts');
  const run = (args: string[], env: Record<string, string> = {}) =>
    spawnSync(...tsNode(fixture, ...args), {
      encoding: 'utf8',
      timeout: 30000,
      env: { ...process.env, STASH_PROBE_MODULES: '1', ...env },
    });
  const help = run(['--help']);
  assert.is(help.status, 0, help.stderr);
  assert.match(help.stdout, /--verification-email-command PATH/);
  // The probe can fail: with Koa imported on purpose it reports it.
  const control = run(['--help'], { STASH_PROBE_CONTROL: '1' });
  assert.is(control.status, 99, control.stderr);
  assert.match(control.stderr, /HEAVY MODULES LOADED: .*koa/);
  const bad = run(['--server-id', '12']);
  assert.is(bad.status, 64);
  assert.is(bad.stderr, 'stash_key_server: --server-id must be 0..9, got 12\n');
  const unknown = run(['--frob']);
  assert.is(unknown.status, 64);
  assert.match(unknown.stderr, /unknown option: --frob/);
  // install/uninstall/status/resync-peer are run for real in install.test.ts and resync.test.ts; here only their usage errors.
  const statusSwitch = run(['status', '--purge-data']);
  assert.is(statusSwitch.status, 64);
  assert.match(statusSwitch.stderr, /option --purge-data is not accepted by `status`/);
  const noPeer = run(['resync-peer']);
  assert.is(noPeer.status, 64);
  assert.match(noPeer.stderr, /resync-peer needs --peer-url/);
});

test('--replication-token given as a flag draws a warning at start (the command line is readable by every local user); the token file and a config file do not', async () => {
  const token = 'flag-token-0123456789abcdef';
  for (const argv of [
    ['--replication-token', token],
    [`--replication-token=${token}`],
    ['resync-peer', '--peer-url', 'http://127.0.0.1:9/v1/replicate', '--replication-token', token],
  ]) {
    const inv = parseCommandLine(argv, reader);
    assert.equal(inv.command !== 'help' && inv.warnings, [TOKEN_FLAG_WARNING], argv.join(' '));
  }
  assert.not.ok(TOKEN_FLAG_WARNING.includes(token));
  files['/token'] = `${token}\n`;
  files['/with-token.conf'] = `replication_token = "${token}"\n`;
  for (const argv of [['--replication-token-file', '/token'], ['--config', '/with-token.conf'], []]) {
    const inv = parseCommandLine(argv, reader);
    assert.equal(inv.command !== 'help' && inv.warnings, [], argv.join(' '));
  }
  assert.match(TOKEN_FLAG_WARNING, /--replication-token-file PATH/);

  // The real server says so once, on stderr, in its log format, without the token; from the file it says nothing.
  const dir = tempDir('token-flag');
  try {
    writeFileSync(join(dir.path, 'token'), `${token}\n`, { mode: 0o600 });
    const [withFlag, withFile] = await Promise.all(
      [
        ['--replication-token', token],
        ['--replication-token-file', join(dir.path, 'token')],
      ].map((extra) => startServerProcess(['--developer', '--bind', '127.0.0.1:0', ...extra])),
    );
    try {
      await new Promise((r) => setTimeout(r, 300));
      const warned = withFlag!
        .stderr()
        .split('\n')
        .filter((l) => l.includes('--replication-token on the command line'));
      assert.is(warned.length, 1, withFlag!.stderr());
      assert.match(
        warned[0]!,
        /^\S+ WARN --replication-token on the command line can be read by every user of this machine/,
      );
      assert.not.ok(withFlag!.stderr().includes(token));
      assert.not.ok(withFile!.stderr().includes('--replication-token on the command line'), withFile!.stderr());
    } finally {
      await Promise.all([withFlag!.stop(), withFile!.stop()]);
    }
  } finally {
    dir.remove();
  }
});

test.run();
