/**
 * The ACME options as the parser takes them: names checked and lower-cased,
 * repeatable, from flags or a config file; exclusive with --tls-cert; email
 * and directory only with a name; a reload keeps them until a restart.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { defaultConfig } from '../../src/keyserver/cli/options.js';
import { parseCommandLine } from '../../src/keyserver/cli/parse.js';
import { helpText } from '../../src/keyserver/cli/help.js';
import { applyReload } from '../../src/keyserver/reload.js';
import { startTestServer } from './harness.js';

const config = (argv: string[], files: Record<string, string> = {}) => {
  const inv = parseCommandLine(['run', ...argv], (p) => {
    if (!(p in files)) throw Object.assign(new Error('missing'), { code: 'ENOENT' });
    return files[p]!;
  });
  if (inv.command !== 'run') throw new Error('not run');
  return inv.config;
};

test('--acme-domain, --acme-email, --acme-directory: parsed from flags and config files', () => {
  const c = config([
    '--acme-domain',
    'Keys.Example.org',
    '--acme-domain',
    'keys2.example.org.',
    '--acme-email',
    'ops@example.org',
  ]);
  assert.equal(c.acmeDomains, ['keys.example.org', 'keys2.example.org']);
  assert.is(c.acmeEmail, 'ops@example.org');
  assert.is(c.acmeDirectory, undefined, "Let's Encrypt unless given");
  const f = config(['--config', '/k.toml'], {
    '/k.toml':
      'acme_domain = ["keys.example.org", "alt.example.org"]\nacme_directory = "https://acme-staging-v02.api.letsencrypt.org/directory"\n',
  });
  assert.equal(f.acmeDomains, ['keys.example.org', 'alt.example.org']);
  assert.is(f.acmeDirectory, 'https://acme-staging-v02.api.letsencrypt.org/directory');
  assert.match(helpText(), /--acme-domain NAME\n.*TLS-ALPN-01/);
});

test('bad ACME values and combinations are usage errors naming the option', () => {
  const fails = (argv: string[], re: RegExp) =>
    assert.throws(
      () => config(argv),
      (e: Error) => re.test(e.message) && (e as { code?: string }).code === 'USAGE',
    );
  fails(
    ['--acme-domain', '*.example.org'],
    /--acme-domain "\*\.example\.org": a wildcard name cannot be validated over TLS-ALPN-01/,
  );
  fails(['--acme-domain', '192.0.2.1'], /--acme-domain "192\.0\.2\.1": give a DNS name, not an IP address/);
  fails(['--acme-domain', 'localhost'], /--acme-domain must be a DNS name such as keys\.example\.org/);
  fails(['--acme-domain', 'bad_name.example.org'], /--acme-domain must be a DNS name/);
  fails(
    ['--acme-domain', 'keys.example.org', '--acme-email', 'not-an-address'],
    /--acme-email must be an email address/,
  );
  fails(
    ['--acme-domain', 'keys.example.org', '--acme-directory', 'http://acme.example.org/dir'],
    /--acme-directory must be an https:\/\/ URL/,
  );
  fails(['--acme-email', 'ops@example.org'], /--acme-email needs --acme-domain NAME/);
  fails(['--acme-directory', 'https://acme.example.org/dir'], /--acme-directory needs --acme-domain NAME/);
  fails(
    ['--acme-domain', 'keys.example.org', '--tls-cert', '/c.pem', '--tls-key', '/k.pem'],
    /give --acme-domain .* or --tls-cert\/--tls-key .*, not both/,
  );
});

test('a reload reports changed ACME options and keeps the running ones until a restart', async () => {
  const s = await startTestServer();
  try {
    const next = {
      ...defaultConfig(),
      ...s.config,
      publicUrl: undefined,
      acmeDomains: ['keys.example.org'],
      acmeEmail: 'ops@example.org',
    };
    const r = await applyReload(
      {
        config: s.config,
        limiters: { requests: { configure() {} }, emails: { configure() {} }, emailIps: { configure() {} } } as never,
        server: s.server,
        logger: s.logger,
      },
      next,
    );
    assert.equal(r.needRestart.sort(), ['acme_domain', 'acme_email']);
    assert.equal(s.config.acmeDomains, []);
    assert.match(
      s.logger.text(),
      /reload: acme_domain changed \(\[\] -> \["keys\.example\.org"\]\); it takes effect only at a restart/,
    );
  } finally {
    await s.stop();
  }
});

test.run();
