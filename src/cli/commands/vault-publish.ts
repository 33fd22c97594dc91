/**
 * `stash vault identity publish --email ADDR [--server URL] [--json]`: sends
 * the vault identity's 65-byte public key to the key server, and records the
 * share in the vault folder for `unpublish --all` (published-shares.ts). The public keys
 * are read with the vault key (identityPublic authenticates them against the
 * encrypted secret keys), so a tampered identity.json cannot get someone
 * else's key published under the owner's address.
 */
import { errorMessage, StashError, UsageError } from '../../errors.js';
import { encodePublicKey, identityPublic, wipe } from '../../vault/index.js';
import { fingerprintLines } from '../../vault/fingerprint-display.js';
import { requireKeyServerUrl } from '../key-server-url.js';
import { formatDuration, out, outJson, warn } from '../output.js';
import { recordPublished, type PublishedShare } from '../published-shares.js';
import type { Invocation } from '../command-types.js';
import { Session } from '../session.js';

export async function run(inv: Invocation): Promise<number> {
  const email = inv.values.email;
  if (typeof email !== 'string' || email.trim() === '')
    throw new UsageError(
      'missing --email ADDR: the address the key server verifies\nusage: stash vault identity publish --email ADDR [--server URL]',
    );
  // Resolved before the password is asked: a missing URL should not cost a prompt.
  const server = await requireKeyServerUrl(inv.values);
  const session = new Session(inv.values);
  let id;
  try {
    const vaultKey = await session.vaultKey();
    try {
      id = identityPublic(session.dir, vaultKey);
    } finally {
      wipe(vaultKey);
    }
  } finally {
    session.close();
  }
  const { publish, topology } = await import('../../keyserver/client.js');
  const published = await publish(server.url, encodePublicKey(id), email.trim());
  await learnTopology(server.url, topology);
  remember(session.dir, {
    code: published.code,
    server: server.url,
    email: email.trim(),
    expiresAt: published.expiresAt.toISOString(),
  });
  if (published.verification === 'failed') {
    throw new StashError('VERIFICATION_NOT_SENT', `the key was stored but cannot be received: ${published.message}`);
  }
  if (inv.values.json === true) {
    outJson({
      server: server.url,
      code: published.code,
      email: email.trim(),
      fingerprint: id.fingerprint,
      expiresAt: published.expiresAt.toISOString(),
      verification: published.verification,
      message: published.message,
    });
    return 0;
  }
  const left = formatDuration(published.expiresAt.getTime() - Date.now());
  out(`Published the public key of ${session.dir} on ${server.url}`);
  out(`Share code:  ${published.code}`);
  out(`Expires:     ${published.expiresAt.toISOString()} (in ${left})`);
  out('');
  out(
    published.verification === 'sent'
      ? `Check your email: ${published.message}.`
      : `Verification: ${published.message}; open the link and confirm.`,
  );
  out('The share can be received only after the link is confirmed.');
  out('');
  out('Then give the share code to the other person, and read them your fingerprint');
  out('over another channel (phone, in person); they type it in `stash vault contact receive`:');
  out(`  ${id.fingerprint}`);
  for (const line of fingerprintLines(id.fingerprint)) out(line);
  return 0;
}

/** Records the share for `unpublish --all`; the share is published either way, so a failure only warns. */
function remember(vaultDir: string, share: PublishedShare): void {
  try {
    recordPublished(vaultDir, share);
  } catch (err) {
    warn(
      `the share was published, but not recorded in ${vaultDir} for \`unpublish --all\` (${errorMessage(err)}); unpublish it by its code`,
    );
  }
}

/**
 * After a publish, the server's topology is kept in the cache (best effort,
 * 3 s at most): a later `contact receive` through this server can then fail
 * over when it is down.
 */
async function learnTopology(
  url: string,
  topology: typeof import('../../keyserver/client.js').topology,
): Promise<void> {
  try {
    const t = await topology(url, { timeoutMs: 3000 });
    const { saveTopology } = await import('../topology-cache.js');
    saveTopology(t, url, [url]);
  } catch {
    /* the share is published; the cache only adds a fallback */
  }
}
