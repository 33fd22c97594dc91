/**
 * Where ACME state lives: `<state dir>/acme/<directory>/`, one folder per
 * ACME directory (Let's Encrypt's production and staging, or a private CA,
 * never share an account), mode 0700, every file 0600:
 *
 *   account-key.pem        the account's private key (ECDSA P-256)
 *   certificate.pem        the certificate chain in use
 *   certificate-key.pem    its private key
 *   status.json            the last attempt: when, what for, the error if any
 *
 * Files are written whole and renamed into place, so a crash leaves the old
 * file or the new one, never half of one; the key is written before its
 * certificate, and a certificate whose key does not match is not used.
 */
import { X509Certificate, createPrivateKey } from 'node:crypto';
import { chmod, mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { TlsMaterial } from '../profile.js';

export interface AcmeStatus {
  directory: string;
  domains: string[];
  /** When an order was last attempted (ms). */
  lastAttemptAt: number;
  /** Why it failed; absent when it succeeded. */
  lastError?: string;
  /** When the certificate in use was obtained, its expiry and when it is renewed (ms). */
  obtainedAt?: number;
  notAfter?: number;
  renewAt?: number;
  accountUrl?: string;
}

/** The folder name of a directory URL: host, port and path, nothing a file name cannot hold. */
export function directoryFolder(directoryUrl: string): string {
  const u = new URL(directoryUrl);
  return `${u.host}${u.pathname}`.replace(/[^A-Za-z0-9.-]+/g, '_').replace(/_+$/, '');
}

export class AcmeFiles {
  readonly dir: string;

  constructor(stateDir: string, directoryUrl: string) {
    this.dir = join(stateDir, 'acme', directoryFolder(directoryUrl));
  }

  private path(name: string): string {
    return join(this.dir, name);
  }

  /** Creates the folders 0700 (and makes them so if they existed looser). */
  async prepare(): Promise<void> {
    await mkdir(this.dir, { recursive: true, mode: 0o700 });
    await chmod(join(this.dir, '..'), 0o700);
    await chmod(this.dir, 0o700);
  }

  private async write(name: string, data: string | Buffer): Promise<void> {
    const tmp = this.path(`.${name}.${process.pid}.tmp`);
    await writeFile(tmp, data, { mode: 0o600 });
    await chmod(tmp, 0o600);
    await rename(tmp, this.path(name));
  }

  private async read(name: string): Promise<Buffer | undefined> {
    try {
      return await readFile(this.path(name));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw err;
    }
  }

  accountKey(): Promise<Buffer | undefined> {
    return this.read('account-key.pem');
  }

  saveAccountKey(pem: Buffer | string): Promise<void> {
    return this.write('account-key.pem', pem);
  }

  /** The stored certificate and key, when both are there, parse and belong together. */
  async certificate(): Promise<(TlsMaterial & { x509: X509Certificate }) | undefined> {
    const [cert, key] = await Promise.all([this.read('certificate.pem'), this.read('certificate-key.pem')]);
    if (!cert || !key) return undefined;
    try {
      const x509 = new X509Certificate(cert);
      if (!x509.checkPrivateKey(createPrivateKey(key))) return undefined;
      return { cert, key, x509 };
    } catch {
      return undefined;
    }
  }

  async saveCertificate(m: TlsMaterial): Promise<void> {
    await this.write('certificate-key.pem', m.key);
    await this.write('certificate.pem', m.cert);
  }

  async status(): Promise<AcmeStatus | undefined> {
    const raw = await this.read('status.json');
    if (!raw) return undefined;
    try {
      return JSON.parse(raw.toString('utf8')) as AcmeStatus;
    } catch {
      return undefined;
    }
  }

  saveStatus(s: AcmeStatus): Promise<void> {
    return this.write('status.json', `${JSON.stringify(s, null, 1)}\n`);
  }
}
