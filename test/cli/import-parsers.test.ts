/**
 * The parsers of `stash import`, each on its own fixture (test/fixtures/import/,
 * written from the formats' documentation): bytes in, named values out, no
 * vault. Also the naming rule, and that every error names the file and the
 * line or field but never a value.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { parse as dotenvParse } from 'dotenv';
import { Collector } from '../../src/cli/import/collector.js';
import { parseDotenv } from '../../src/cli/import/dotenv.js';
import { duplicateKey, parseJsonObject } from '../../src/cli/import/json.js';
import { parseBitwarden } from '../../src/cli/import/bitwarden.js';
import { parseOnePassword } from '../../src/cli/import/onepassword.js';
import { parseCsv } from '../../src/cli/import/csv.js';
import { parsePassEntry } from '../../src/cli/import/pass.js';
import { assignNames, fieldName, mapName } from '../../src/cli/import/names.js';
import { assignPaths, fieldNameOf, segmentOf, type ImportEntry } from '../../src/cli/import/paths.js';
import { parseTotp } from '../../src/cli/totp/otpauth.js';

const fixtures = join(process.cwd(), 'test', 'fixtures', 'import');
const fixture = (name: string): Buffer => readFileSync(join(fixtures, name));

type Parser = (bytes: Buffer, file: string, sink: Collector) => unknown;

/** name -> { value, from } after the naming rule, and the warnings. */
function run(
  parser: Parser,
  bytes: Buffer,
  file = 'in',
): {
  values: Map<string, { value: string; from: string; mappedFrom: string | null }>;
  warnings: string[];
  empty: number;
} {
  const sink = new Collector(file);
  try {
    const warnings = (parser(bytes, file, sink) ?? []) as string[];
    const values = new Map(
      assignNames(sink.entries()).map((n) => [
        n.entry,
        { value: n.value.toString('utf8'), from: n.from, mappedFrom: n.entry === n.name ? null : n.name },
      ]),
    );
    return { values, warnings, empty: sink.empty };
  } finally {
    sink.wipe();
  }
}

function rejects(parser: Parser, text: string, message: RegExp, secret: string): void {
  try {
    run(parser, Buffer.from(text), 'f.in');
  } catch (err) {
    assert.is((err as { code?: string }).code, 'IMPORT_INVALID');
    assert.match((err as Error).message, message);
    assert.not.ok((err as Error).message.includes(secret), `the message holds no value: ${(err as Error).message}`);
    return;
  }
  assert.unreachable(`expected ${message}`);
}

test('naming rule: valid names kept, others mapped, logins TITLE_FIELD, clashes _2', () => {
  assert.is(mapName('my.dotted-key'), 'MY_DOTTED_KEY');
  assert.is(mapName(' Wi-Fi (home) '), 'WI_FI_HOME');
  assert.is(mapName('1Password'), '_1PASSWORD');
  assert.is(mapName('Café'), 'CAFE');
  assert.is(mapName('***'), 'ITEM');
  assert.is(mapName('x'.repeat(300)).length, 128);
  assert.is(fieldName('GitHub', 'password'), 'GITHUB_PASSWORD');
  assert.is(fieldName('a'.repeat(200), 'NOTES').length, 128);
  const named = assignNames([
    { name: 'lower_ok', from: 'a', value: Buffer.from('1') },
    { name: 'LOWER-OK', from: 'b', value: Buffer.from('2') },
    { name: 'LOWER_OK', from: 'c', value: Buffer.from('3') },
    { name: 'LOWER_OK', from: 'd', value: Buffer.from('4') },
  ]);
  assert.equal(
    named.map((n) => n.entry),
    ['lower_ok', 'LOWER_OK', 'LOWER_OK_2', 'LOWER_OK_3'],
  );
});

test('dotenv: quotes, escapes, comments, multi-line values, export and colon forms, as dotenv reads them', () => {
  const bytes = fixture('sample.env');
  const { values, empty } = run(parseDotenv, bytes, 'sample.env');
  const expected = dotenvParse(bytes);
  // Every key dotenv reads is imported with dotenv's value (an empty one left out).
  for (const [key, value] of Object.entries(expected)) {
    if (value === '') continue;
    const entry = /^[A-Za-z_][A-Za-z0-9_]*$/.test(key) ? key : mapName(key);
    assert.is(values.get(entry)?.value, value, key);
  }
  assert.is(empty, 1);
  assert.is(values.get('API_TOKEN')?.value, 'tok-123');
  assert.is(values.get('DB_PASSWORD')?.value, 'p@ss "quoted" #not-a-comment');
  assert.is(values.get('PLAIN_VALUE')?.value, 'spaces around are trimmed');
  assert.is(values.get('ESCAPES')?.value, 'first\nsecond\\ttab-kept-as-is');
  assert.is(values.get('MULTI_LINE')?.value, '-----BEGIN KEY-----\nline two\n-----END KEY-----');
  assert.is(values.get('SINGLE_MULTI')?.value, 'a\nb');
  assert.is(values.get('BACKTICK')?.value, 'it\'s "both"');
  assert.is(values.get('COLON_FORM')?.value, 'colon value');
  assert.equal(values.get('MY_DOTTED_KEY'), { value: 'dot-value', from: 'line 13', mappedFrom: 'my.dotted-key' });
  assert.is(values.get('MULTI_LINE')?.from, 'line 6');
});

test('dotenv: a line that is not KEY=value is an error naming its line, not its text', () => {
  rejects(parseDotenv, 'A=1\n# ok\nhunter2-secret\nB=2\n', /^f\.in line 3: not KEY=value/, 'hunter2');
  // An unclosed quote: the value's later lines are not assignments.
  rejects(parseDotenv, 'A="open\nsecret-tail\n', /^f\.in line 2: not KEY=value .*must be quoted/, 'secret-tail');
  // CRLF files count lines the same way.
  rejects(parseDotenv, 'A=1\r\n\r\nsecret words here\r\n', /^f\.in line 3:/, 'secret');
});

test('json: a flat object of strings, as env --format json prints it; anything else names the field', () => {
  const { values } = run(parseJsonObject, Buffer.from('{\n  "API_TOKEN": "t\\n1",\n  "db-url": "postgres://x"\n}\n'));
  assert.equal(values.get('API_TOKEN'), { value: 't\n1', from: 'field "API_TOKEN"', mappedFrom: null });
  assert.equal(values.get('DB_URL'), { value: 'postgres://x', from: 'field "db-url"', mappedFrom: 'db-url' });
  rejects(parseJsonObject, '{"A": "s3cret", "B": 42}', /^f\.in: field "B" is a number, not a string/, 's3cret');
  rejects(parseJsonObject, '{"A": {"nested": "s3cret"}}', /field "A" is an object/, 's3cret');
  rejects(parseJsonObject, '["s3cret"]', /the JSON is an array/, 's3cret');
  // V8 would quote the input in its message; only a line and column are given.
  rejects(
    parseJsonObject,
    '{\n"A": "s3cret",\n"B" "s3cret2"}',
    /^f\.in( line 3, column \d+)?: not valid JSON$/,
    's3cret',
  );
});

test('json: a key given twice is refused with where both stand, never one value kept silently (issue 40, item 4)', () => {
  rejects(
    parseJsonObject,
    '{"DUP":"first-s3cret","DUP":"second-s3cret"}',
    /^f\.in line 1, column 23: the key "DUP" is given a second time in one object \(first at line 1, column 2\), and JSON keeps only the last value; remove one or rename it \(nothing was imported\)$/,
    's3cret',
  );
  // The same key however it is escaped, on another line.
  rejects(
    parseJsonObject,
    '{\n  "A": "x",\n  "DUP": "s3cret",\n  "\\u0044UP": "s3cret2"\n}',
    /^f\.in line 4, column 3: the key "DUP" is given a second time in one object \(first at line 3, column 3\)/,
    's3cret',
  );
  // At any depth, so Bitwarden's JSON too (a login with two passwords).
  rejects(
    parseBitwarden,
    '{"items": [{"type": 1, "name": "X", "login": {"password": "s3cret", "password": "s3cret2"}}]}',
    /^f\.in line 1, column 69: the key "password" is given a second time/,
    's3cret',
  );
  // Equal keys in different objects, and key-like text inside values, are not duplicates.
  assert.is(duplicateKey('{"a": {"k": "1"}, "b": {"k": "2"}, "c": [{"k": 1}, {"k": 2}]}'), null);
  assert.is(duplicateKey('{"a": "\\"a\\": {\\"a\\", [", "b": ["a", "a"], "c": "}"}'), null);
  assert.equal(duplicateKey('[{"x": 1}, {"y": [{}], "y": 2}]'), { key: 'y', first: 12, at: 23 });
  // Two keys that only map to the same entry name are both kept (names.ts, rule 4).
  const { values } = run(parseJsonObject, Buffer.from('{"my.key": "1", "MY_KEY": "2"}'));
  assert.equal([...values.keys()], ['MY_KEY', 'MY_KEY_2']);
});

test('dotenv: a key assigned twice is refused naming both lines (dotenv itself keeps the last silently)', () => {
  rejects(
    parseDotenv,
    'DUP=first-s3cret\nB=2\nexport DUP="second-s3cret"\n',
    /^f\.in line 3: DUP is assigned a second time \(first on line 1\), and dotenv keeps only the last value; remove one or rename it \(nothing was imported\)$/,
    's3cret',
  );
});

test('bitwarden: logins with username, password, TOTP as otpauth, URL, notes and custom fields; notes of other items', () => {
  const { values, warnings } = run(parseBitwarden, fixture('bitwarden.json'), 'bw.json');
  const v = (name: string): string | undefined => values.get(name)?.value;
  assert.is(v('GITHUB_USERNAME'), 'octocat');
  assert.is(v('GITHUB_PASSWORD'), 'hunter2-gh');
  assert.is(v('GITHUB_URL'), 'https://github.com/login');
  assert.is(v('GITHUB_NOTES'), 'recovery codes:\nabcd-efgh\nijkl-mnop');
  assert.is(v('GITHUB_API_KEY'), 'ghp_example');
  assert.is(v('GITHUB_2FA_ENABLED'), 'true');
  assert.not.ok(
    [...values.keys()].some((k) => k.includes('ALIAS')),
    'a linked field holds no value',
  );
  const totp = parseTotp(v('GITHUB_TOTP')!);
  assert.is(totp.secret.toString('hex'), Buffer.from('48656c6c6f21deadbeef', 'hex').toString('hex'));
  assert.is(totp.issuer, 'GitHub');
  // The second item of the same name: every field gets _2.
  assert.equal(values.get('GITHUB_PASSWORD_2'), {
    value: 'hunter2-work',
    from: 'item "GitHub" password',
    mappedFrom: 'GITHUB_PASSWORD',
  });
  assert.is(v('GITHUB_USERNAME_2'), 'work-octocat');
  assert.match(
    v('GITHUB_TOTP_2')!,
    /^otpauth:\/\/totp\/GitHub\?secret=JBSWY3DPEHPK3PXP&algorithm=SHA1&digits=6&period=30$/,
  );
  assert.is(v('WI_FI_HOME_NOTES'), 'SSID: home\nkey: correct horse');
  assert.is(v('VISA_NOTES'), 'call the bank first');
  assert.not.ok(
    [...values.keys()].some((k) => k.startsWith('VISA_') && k !== 'VISA_NOTES'),
    'card fields are not imported',
  );
  assert.equal(warnings, ['bw.json: only the notes and custom fields were imported of "Visa" (card)']);
  for (const w of warnings) assert.not.ok(w.includes('4111'), 'warnings hold no value');
});

test('bitwarden: an encrypted export, or items of the wrong shape, are refused by name', () => {
  rejects(
    parseBitwarden,
    '{"encrypted": true, "encKeyValidation_DO_NOT_EDIT": "2.x", "items": []}',
    /encrypted Bitwarden export/,
    '2.x',
  );
  rejects(
    parseBitwarden,
    '{"items": [{"type": 1, "login": {"password": "s3cret"}}]}',
    /^f\.in: items\[0\] has no name$/,
    's3cret',
  );
  rejects(
    parseBitwarden,
    '{"items": [{"type": 1, "name": "X", "login": {"password": 12345}}]}',
    /items\[0\] \("X"\) password is a number, not text/,
    '12345',
  );
  rejects(parseBitwarden, '{"folders": [], "note": "zzz"}', /no "items" array/, 'zzz');
});

test('1password: the 1Password 8 CSV, with quoted commas, doubled quotes, multi-line notes and OTPAuth', () => {
  const { values, empty } = run(parseOnePassword, fixture('1password.csv'), '1p.csv');
  const v = (name: string): string | undefined => values.get(name)?.value;
  assert.is(v('EXAMPLE_MAIL_USERNAME'), 'alice@example.com');
  assert.is(v('EXAMPLE_MAIL_PASSWORD'), 'p,a"ss');
  assert.is(v('EXAMPLE_MAIL_URL'), 'https://mail.example.com');
  assert.is(v('EXAMPLE_MAIL_NOTES'), 'line one\r\nline two, with a comma');
  const totp = parseTotp(v('EXAMPLE_MAIL_TOTP')!);
  assert.equal([totp.digits, totp.period, totp.algorithm, totp.label], [8, 60, 'SHA256', 'Mail:alice']);
  assert.is(values.get('EXAMPLE_MAIL_PASSWORD')?.from, 'line 2 "Example Mail" Password');
  assert.is(v('ROUTER_PASSWORD'), 'r0uter!');
  assert.not.ok(values.has('ROUTER_TOTP'), 'an empty OTPAuth cell gives no entry');
  assert.is(v('_1PASSWORD_ACCOUNT_PASSWORD'), 'secret-1p');
  assert.match(v('_1PASSWORD_ACCOUNT_TOTP')!, /^otpauth:\/\/totp\/1Password%20Account\?secret=JBSWY3DPEHPK3PXP/);
  assert.not.ok(
    [...values.keys()].some((k) => /FAVORITE|ARCHIVED|TAGS/.test(k)),
    'metadata columns are not imported',
  );
  assert.is(empty, 2, 'the empty Notes cells are left out');
});

test('csv: errors name the line; a value is never quoted in them', () => {
  const head = 'Title,Password\n';
  rejects(parseOnePassword, `${head}"A","s3cret\n`, /^f\.in line 2: a quoted field is not closed$/, 's3cret');
  rejects(parseOnePassword, `${head}"A","s3cret"x\n`, /^f\.in line 2: text after the closing quote/, 's3cret');
  rejects(parseOnePassword, `${head}A,s3c"ret\n`, /^f\.in line 2: a quote inside an unquoted field/, 's3c');
  rejects(parseOnePassword, `${head}A,s3cret,extra\n`, /^f\.in line 2: 3 fields, but the header has 2/, 's3cret');
  rejects(parseOnePassword, 'Label,Secret\nA,zzz\n', /no Title column/, 'zzz');
  const records = parseCsv(Buffer.from('\ufeffa,"b\n""c"""\r\n\r\nd,e'), 'x');
  assert.equal(
    records.map((r) => [r.line, r.fields.map(String)]),
    [
      [1, ['a', 'b\n"c"']],
      [4, ['d', 'e']],
    ],
  );
});

test('pass entry, --flat: first line is the password, the rest NAME_NOTES, an otpauth line also NAME_TOTP', () => {
  const body = 'hunter2\r\nlogin: alice\notpauth://totp/Site:alice?secret=JBSWY3DPEHPK3PXP&issuer=Site\n\n';
  const { values } = run(
    (bytes, _file, sink) => parsePassEntry('web/site.example', bytes, sink, true),
    Buffer.from(body),
  );
  assert.equal(values.get('WEB_SITE_EXAMPLE'), {
    value: 'hunter2',
    from: 'web/site.example.gpg password (line 1)',
    mappedFrom: null,
  });
  assert.is(
    values.get('WEB_SITE_EXAMPLE_NOTES')?.value,
    'login: alice\notpauth://totp/Site:alice?secret=JBSWY3DPEHPK3PXP&issuer=Site',
  );
  assert.is(parseTotp(values.get('WEB_SITE_EXAMPLE_TOTP')!.value).issuer, 'Site');
  const only = run((bytes, _file, sink) => parsePassEntry('a', bytes, sink, true), Buffer.from('just-a-password\n'));
  assert.equal([...only.values.keys()], ['A']);
});

/** The entries of a structured parse: path -> value, fields (name -> value) and sources; and the warnings. */
function structured(parse: (sink: Collector) => unknown): {
  entries: Map<string, { value: string; fields: Record<string, string>; mappedFrom: string | null }>;
  rows: ImportEntry[];
  warnings: string[];
} {
  const sink = new Collector('in');
  try {
    const warnings = (parse(sink) ?? []) as string[];
    const rows = assignPaths(sink.entries());
    const entries = new Map(
      rows.map((e) => [
        e.path,
        {
          value: e.value.toString('utf8'),
          fields: Object.fromEntries(e.fields.map((f) => [f.name, f.value.toString('utf8')])),
          mappedFrom: e.mappedFrom,
        },
      ]),
    );
    return { entries, rows, warnings };
  } finally {
    sink.wipe();
  }
}

test('structure rule: segments and field names mapped, valid ones kept', () => {
  assert.is(segmentOf('github.com'), 'github.com');
  assert.is(segmentOf('me@example.com'), 'me@example.com');
  assert.is(segmentOf('Bank Account'), 'Bank-Account');
  assert.is(segmentOf(' Wi-Fi (home) '), 'Wi-Fi-home');
  assert.is(segmentOf('Café'), 'Cafe');
  assert.is(segmentOf('***'), 'item');
  assert.is(segmentOf('..'), 'item');
  assert.is(segmentOf('x'.repeat(300)).length, 128);
  assert.is(fieldNameOf('user'), 'username');
  assert.is(fieldNameOf('Login'), 'username');
  assert.is(fieldNameOf('URL'), 'url');
  assert.is(fieldNameOf('otpauth'), 'totp');
  assert.is(fieldNameOf('PIN'), 'pin');
  assert.is(fieldNameOf('Security Question'), 'security-question');
  assert.is(fieldNameOf('2FA enabled'), 'field-2fa-enabled');
  assert.is(fieldNameOf('API_key!'), 'api_key');
  assert.is(fieldNameOf('???'), 'field');
  assert.is(fieldNameOf('a'.repeat(40)).length, 32);
});

test('pass entry: line 1 the value, key: value lines fields, otpauth the totp field, the other lines notes', () => {
  const body = [
    'hunter2',
    '',
    'user: alice',
    'URL: https://site.example/login',
    'https://not-a-key.example',
    'Security Question:   first pet   ',
    '  indented: stays in the notes',
    'empty:',
    'otpauth://totp/Site:alice?secret=JBSWY3DPEHPK3PXP&issuer=Site',
    'free text, kept',
    '',
    '',
  ].join('\r\n');
  const { entries, rows } = structured((sink) => parsePassEntry('web/site.example', Buffer.from(body), sink));
  assert.equal(entries.get('web/site.example')?.value, 'hunter2');
  const fields = entries.get('web/site.example')!.fields;
  assert.equal(Object.keys(fields), ['username', 'url', 'security-question', 'totp', 'notes']);
  assert.is(fields.username, 'alice');
  assert.is(fields.url, 'https://site.example/login');
  assert.is(fields['security-question'], 'first pet');
  assert.is(parseTotp(fields.totp!).issuer, 'Site');
  assert.is(
    fields.notes,
    'https://not-a-key.example\r\n  indented: stays in the notes\r\nempty:\r\nfree text, kept',
    'lines as written; blank lines at either end dropped',
  );
  assert.equal(
    rows[0]!.fields.map((f) => [f.name, f.from, f.mappedFrom]),
    [
      ['username', 'web/site.example.gpg line 3', 'user'],
      ['url', 'web/site.example.gpg line 4', 'URL'],
      ['security-question', 'web/site.example.gpg line 6', 'Security Question'],
      ['totp', 'web/site.example.gpg line 9', null],
      ['notes', 'web/site.example.gpg notes', null],
    ],
  );
  // A seed in a totp: line is normalised as the otpauth line is; one stash cannot read is kept with a warning.
  const seeds = structured((sink) => [
    ...parsePassEntry('a', Buffer.from('pw\ntotp: JBSWY3DPEHPK3PXP\n'), sink),
    ...parsePassEntry('b', Buffer.from('pw\notp: steam://ABC\n'), sink),
  ]);
  assert.match(seeds.entries.get('a')!.fields.totp!, /^otpauth:\/\/totp\/a\?secret=JBSWY3DPEHPK3PXP/);
  assert.is(seeds.entries.get('b')!.fields.totp, 'steam://ABC');
  assert.equal(seeds.warnings, [
    'b.gpg: its TOTP seed is not an otpauth://totp/ URI or a base32 secret; it was kept as written, and stash otp cannot use it',
  ]);
  // No password line: the notes are the value. A one-line entry has no fields.
  const noPw = structured((sink) => {
    parsePassEntry('n', Buffer.from('\nonly notes\n'), sink);
    parsePassEntry('o', Buffer.from('just-a-password'), sink);
  });
  assert.equal(noPw.entries.get('n'), { value: 'only notes', fields: {}, mappedFrom: null });
  assert.equal(noPw.entries.get('o'), { value: 'just-a-password', fields: {}, mappedFrom: null });
});

test('structure rule: clashes get -2 on the last segment or the field; an item with no value gets an empty one', () => {
  const csv = [
    'Title,Vault,Username,Password,Url,PIN,pin',
    'GitHub,Work/Team,alice,pw1,https://a,1,2',
    'GitHub,Work/Team,bob,pw2,,,',
    'Git Hub,,,,https://c,,',
  ].join('\n');
  const { entries, rows } = structured((sink) => parseOnePassword(Buffer.from(csv), '1p.csv', sink));
  assert.equal([...entries.keys()], ['Work-Team/GitHub', 'Work-Team/GitHub-2', 'Git-Hub']);
  assert.equal(entries.get('Work-Team/GitHub'), {
    value: 'pw1',
    fields: { username: 'alice', url: 'https://a', pin: '1', 'pin-2': '2' },
    mappedFrom: 'Work/Team/GitHub',
  });
  assert.is(rows[1]!.mappedFrom, 'Work/Team/GitHub', 'a clash is listed as a mapping');
  assert.equal(entries.get('Git-Hub'), { value: '', fields: { url: 'https://c' }, mappedFrom: 'Git Hub' });
  // Bitwarden: nested folders by '/', an organisation item's collection, two URIs.
  const bw = JSON.stringify({
    folders: [{ id: 'f', name: 'Work/AWS' }],
    collections: [{ id: 'c', name: 'Shared' }],
    items: [
      { type: 1, name: 'prod', folderId: 'f', login: { password: 'p', uris: [{ uri: 'u1' }, { uri: 'u2' }] } },
      { type: 1, name: 'db', collectionIds: ['c'], login: { username: 'x', password: 'q' } },
    ],
  });
  const b = structured((sink) => parseBitwarden(Buffer.from(bw), 'bw.json', sink));
  assert.equal([...b.entries.keys()], ['Work/AWS/prod', 'Shared/db']);
  assert.equal(b.entries.get('Work/AWS/prod')!.fields, { url: 'u1', 'url-2': 'u2' });
  // --flat keeps the first URI only, as before.
  const flat = run((bytes, file, sink) => parseBitwarden(bytes, file, sink, true), Buffer.from(bw));
  assert.equal([...flat.values.keys()], ['PROD_PASSWORD', 'PROD_URL', 'DB_USERNAME', 'DB_PASSWORD']);
});

test('the collector keeps values in one secure buffer and refuses a value over 64 KiB by where it came from', () => {
  const sink = new Collector('big.env');
  try {
    const temp = Buffer.from('temporary');
    sink.add('A', 'line 1', temp);
    assert.ok(
      temp.every((b) => b === 0),
      'a Buffer handed over is zeroed once copied',
    );
    for (let i = 0; i < 100; i++) sink.add(`K${i}`, `line ${i + 2}`, 'v'.repeat(100));
    assert.is(sink.entries()[0]!.value.toString(), 'temporary');
    assert.is(sink.entries()[100]!.value.toString(), 'v'.repeat(100));
    assert.throws(
      () => sink.add('BIG', 'line 200', 'x'.repeat(64 * 1024 + 1)),
      /^big\.env: line 200: the value is 65537 bytes; an entry holds at most 65536/,
    );
  } finally {
    sink.wipe();
  }
  assert.is(sink.entries().length, 0);
});

test.run();
