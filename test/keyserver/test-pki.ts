/**
 * A throwaway certificate authority made with openssl at test time (no
 * private key is committed): server certificates with EC or RSA keys, any
 * names, and validity in the past or ending soon (openssl ca's -startdate /
 * -enddate). Every file lands in the folder given.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export interface TestCa {
  dir: string;
  /** PEM of the CA certificate (what clients trust). */
  pem: Buffer;
  caPath: string;
}

export interface IssuedCert {
  certPath: string;
  keyPath: string;
  cert: Buffer;
  key: Buffer;
}

function openssl(dir: string, ...args: string[]): void {
  execFileSync('openssl', args, { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] });
}

const keyArgs = (type: 'ec' | 'rsa') =>
  type === 'ec' ? ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1'] : ['-newkey', 'rsa:2048'];

/** A CA named `name` in `dir`. */
export function makeCa(dir: string, name = 'stash test CA'): TestCa {
  const base = name.replace(/\W+/g, '-');
  openssl(
    dir,
    'req',
    '-x509',
    ...keyArgs('ec'),
    '-nodes',
    '-keyout',
    `${base}.key`,
    '-out',
    `${base}.pem`,
    '-days',
    '365',
    '-subj',
    `/CN=${name}`,
  );
  writeFileSync(
    join(dir, `${base}.cnf`),
    [
      '[ca]',
      'default_ca = test',
      '[test]',
      `database = ${base}.index`,
      'new_certs_dir = .',
      `serial = ${base}.serial`,
      'default_md = sha256',
      'policy = any',
      'copy_extensions = none',
      'unique_subject = no',
      '[any]',
      'commonName = supplied',
      '',
    ].join('\n'),
  );
  writeFileSync(join(dir, `${base}.index`), '');
  writeFileSync(join(dir, `${base}.serial`), '1000\n');
  const caPath = join(dir, `${base}.pem`);
  return { dir, pem: readFileSync(caPath), caPath };
}

let issued = 0;

/**
 * A server certificate signed by `ca` for `names` (DNS names and IP
 * addresses); valid from now for `days` (90), or between `start` and `end`.
 */
export function issueCert(
  ca: TestCa,
  opts: { names?: string[]; keyType?: 'ec' | 'rsa'; days?: number; start?: Date; end?: Date } = {},
): IssuedCert {
  const names = opts.names ?? ['127.0.0.1', 'localhost'];
  const base = `server-${++issued}-${process.pid}`;
  const caBase = ca.caPath.replace(/\.pem$/, '');
  const dir = ca.dir;
  openssl(
    dir,
    'req',
    ...keyArgs(opts.keyType ?? 'ec'),
    '-nodes',
    '-keyout',
    `${base}.key`,
    '-out',
    `${base}.csr`,
    '-subj',
    `/CN=${names[0]}`,
  );
  const san = names.map((n) => (/^[0-9.]+$|:/.test(n) ? `IP:${n}` : `DNS:${n}`)).join(',');
  writeFileSync(join(dir, `${base}.ext`), `subjectAltName=${san}\nextendedKeyUsage=serverAuth\n`);
  const stamp = (d: Date) => `${d.toISOString().replace(/[-:T]/g, '').slice(0, 14)}Z`;
  const validity =
    opts.start && opts.end
      ? ['-startdate', stamp(opts.start), '-enddate', stamp(opts.end)]
      : ['-days', String(opts.days ?? 90)];
  openssl(
    dir,
    'ca',
    '-batch',
    '-notext',
    '-config',
    `${caBase}.cnf`,
    '-cert',
    `${caBase}.pem`,
    '-keyfile',
    `${caBase}.key`,
    '-in',
    `${base}.csr`,
    '-out',
    `${base}.pem`,
    '-extfile',
    `${base}.ext`,
    ...validity,
  );
  const certPath = join(dir, `${base}.pem`);
  const keyPath = join(dir, `${base}.key`);
  return { certPath, keyPath, cert: readFileSync(certPath), key: readFileSync(keyPath) };
}
