/**
 * The `acme:` line of `stash_key_server status`, from the status file the
 * server keeps beside its ACME certificate (files.ts): the last order, and
 * why it failed. It is read from the state folder, so it is there when the
 * server is not running: after a start that ended because no certificate
 * could be had (exit 76), it says why.
 */
import type { ServerConfig } from '../../server-config.js';
import { LETS_ENCRYPT_DIRECTORY } from '../../cli/acme-values.js';
import { AcmeFiles } from './files.js';

const show = (ms: number | undefined) => (ms === undefined ? 'unknown' : new Date(ms).toISOString());

/** One line, or undefined without --acme-domain. */
export async function acmeStatusLine(
  c: Pick<ServerConfig, 'acmeDomains' | 'acmeDirectory' | 'stateDir'>,
  stateDir = c.stateDir,
): Promise<string | undefined> {
  if (c.acmeDomains.length === 0) return undefined;
  const directory = c.acmeDirectory ?? LETS_ENCRYPT_DIRECTORY;
  const files = new AcmeFiles(stateDir, directory);
  const head = `acme: ${c.acmeDomains.join(', ')} from ${directory}`;
  let s;
  try {
    s = await files.status();
  } catch (err) {
    return `${head}: ${files.dir} cannot be read (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`;
  }
  if (!s) return `${head}: no order yet (${files.dir})`;
  if (s.lastError !== undefined) {
    const serving =
      s.notAfter !== undefined ? `; serving the previous certificate until ${show(s.notAfter)}` : '; no certificate';
    return `${head}: LAST ORDER FAILED at ${show(s.lastAttemptAt)}: ${s.lastError}${serving}`;
  }
  return `${head}: certificate obtained ${show(s.obtainedAt)}, valid until ${show(s.notAfter)}, renewal from ${show(s.renewAt)}`;
}
