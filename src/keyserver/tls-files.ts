/**
 * The TLS certificate chain and key files of `--tls-cert` / `--tls-key`, read
 * and checked before use: at start (src/keyserver/server.ts) and on every
 * reload (src/keyserver/reload.ts), so a renewed file that is not PEM, or a key
 * that does not belong to the certificate, is named with its file either way.
 */
import { createPrivateKey, X509Certificate } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { ConfigError, errorMessage } from '../errors.js';

async function readOption(path: string, flag: string): Promise<Buffer> {
  try {
    return await readFile(path);
  } catch (err) {
    throw new ConfigError(`${flag} ${path}: cannot read the file (${(err as NodeJS.ErrnoException).code ?? 'error'})`);
  }
}

/**
 * The certificate chain and key, checked before they are used: a file that is not PEM, a key that does not belong to the certificate, each
 * named with its file (exit 78) instead of a bare OpenSSL error.
 */
export async function readTls(certPath: string, keyPath: string): Promise<{ cert: Buffer; key: Buffer }> {
  const cert = await readOption(certPath, '--tls-cert');
  const key = await readOption(keyPath, '--tls-key');
  let x509: X509Certificate;
  try {
    if (!cert.includes('-----BEGIN CERTIFICATE-----')) throw new Error('no "BEGIN CERTIFICATE" block');
    x509 = new X509Certificate(cert);
  } catch (err) {
    throw new ConfigError(`--tls-cert ${certPath}: not a PEM certificate (${errorMessage(err)}); give the certificate chain in PEM, starting with -----BEGIN CERTIFICATE-----`);
  }
  let privateKey;
  try {
    if (!/-----BEGIN [A-Z ]*PRIVATE KEY-----/.test(key.toString('latin1'))) throw new Error('no "BEGIN ... PRIVATE KEY" block');
    privateKey = createPrivateKey(key);
  } catch (err) {
    throw new ConfigError(`--tls-key ${keyPath}: not an unencrypted PEM private key (${errorMessage(err)}); give the key in PEM, starting with -----BEGIN PRIVATE KEY-----`);
  }
  if (!x509.checkPrivateKey(privateKey)) {
    throw new ConfigError(`--tls-key ${keyPath} is not the private key of the certificate in --tls-cert ${certPath}`);
  }
  return { cert, key };
}

