/**
 * Which key server `identity publish`, `contact receive` and `doctor` talk to:
 * --server, else STASH_KEY_SERVER_URL, else key_server_url in the config file
 * (one rule for all three: src/config/server-url.ts; a bad flag is a usage
 * error, 64, a bad environment or file value a configuration error, 78).
 * Certificates are verified by Node; a private CA is added with
 * NODE_EXTRA_CA_CERTS, never by turning verification off.
 */
import { StashError, UsageError } from '../errors.js';
import { checkKeyServerUrl } from '../config/server-url.js';
import { warn } from './output.js';

export interface KeyServerUrl {
  url: string;
  /** Where it came from, for messages and --json: "--server", "STASH_KEY_SERVER_URL" or "<file>: key_server_url". */
  from: string;
}

/**
 * The key server URL and its source, or null when none is configured. The
 * config file is read only when --server is absent, so a broken file does not
 * stand in the way of an explicit URL.
 */
export async function findKeyServerUrl(
  values: Record<string, string | boolean | string[] | undefined>,
  env: NodeJS.ProcessEnv = process.env,
): Promise<KeyServerUrl | null> {
  if (typeof values.server === 'string')
    return { url: checkKeyServerUrl(values.server, '--server', (m) => new UsageError(m)), from: '--server' };
  const { loadConfig } = await import('../config/app-config.js');
  const config = await loadConfig(env);
  const s = config.keyServerUrl;
  if (s.value === null) return null;
  const from = s.source === 'environment' ? String(s.from) : `${config.path}: key_server_url`;
  return { url: s.value, from };
}

const LOOPBACK = new Set(['localhost', '127.0.0.1', '[::1]']);

/**
 * Like findKeyServerUrl, but no URL anywhere is an error that names the three
 * ways to give one. Plain http:// to another machine draws a warning: the
 * fingerprint check still protects the key, but the address and the code
 * travel in the clear.
 */
export async function requireKeyServerUrl(
  values: Record<string, string | boolean | string[] | undefined>,
  env: NodeJS.ProcessEnv = process.env,
): Promise<KeyServerUrl> {
  const found = await findKeyServerUrl(values, env);
  if (found) {
    const url = new URL(found.url);
    if (url.protocol === 'http:' && !LOOPBACK.has(url.hostname)) {
      warn(
        `${found.url} (from ${found.from}) is plain http: your address and the share code travel unencrypted; use https://`,
      );
    }
    return found;
  }
  const { configPath } = await import('../config/app-config.js');
  throw new StashError(
    'NO_KEY_SERVER',
    'no key server configured: give --server URL, set STASH_KEY_SERVER_URL, ' +
      `or add key_server_url = "https://..." to ${configPath(env).path}`,
  );
}
