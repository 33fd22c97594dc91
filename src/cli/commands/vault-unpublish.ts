/**
 * `stash vault identity unpublish CODE | --all [--server URL] [--json]`:
 * deletes published shares before their expiry. Each request names the code,
 * a timestamp and a fresh nonce, signed with the identity's Ed25519 key (the
 * key the share holds: the server checks the signature against it), so
 * nobody else can unpublish a share and a request cannot be used again
 * later. The server writes a tombstone that replicates through the cluster.
 *
 * A named code goes to --server, else to the server recorded when it was
 * published, else to the configured one; every server of a cluster passes
 * it on to the share's owner. --all takes the codes this vault recorded at
 * publish (published-shares.ts). A code already gone (expired, unpublished)
 * is forgotten; with --all that is no failure.
 */
import { errorCode, errorMessage, UsageError } from '../../errors.js';
import { identitySecret, wipe } from '../../vault/index.js';
import { sodium } from '../../vault/sodium.js';
import { exitCodeFor } from '../exit-codes.js';
import { requireKeyServerUrl } from '../key-server-url.js';
import { note, out, outJson, terminalSafe } from '../output.js';
import { forgetPublished, readPublished } from '../published-shares.js';
import type { Invocation } from '../command-types.js';
import { Session } from '../session.js';

const USAGE = 'usage: stash vault identity unpublish CODE | --all [--server URL]';
/** Answers that mean the share is not there to delete any more. */
const GONE = new Set(['SHARE_NOT_FOUND', 'SHARE_EXPIRED']);

interface Outcome {
  code: string;
  server: string;
  deletedAt?: string;
  gone?: string;
  error?: { code: string; message: string };
}

export async function run(inv: Invocation): Promise<number> {
  const json = inv.values.json === true;
  const all = inv.values.all === true;
  const given = inv.positionals[0];
  if (all === (given !== undefined)) {
    throw new UsageError(
      `${all ? 'give either a share CODE or --all, not both' : 'give the share CODE to unpublish, or --all for every share this vault published'}\n${USAGE}`,
    );
  }
  const { parseShareCode } = await import('../../keyserver/share-code.js');
  // A typo is reported before any password prompt or request.
  const code = given === undefined ? undefined : parseShareCode(given).display;
  const session = new Session(inv.values);
  const outcomes: Outcome[] = [];
  try {
    const explicit = typeof inv.values.server === 'string' ? (await requireKeyServerUrl(inv.values)).url : undefined;
    const recorded = readPublished(session.dir);
    let todo: Array<{ code: string; server: string }>;
    if (code !== undefined) {
      const server =
        explicit ?? recorded.find((s) => s.code === code)?.server ?? (await requireKeyServerUrl(inv.values)).url;
      todo = [{ code, server }];
    } else {
      todo = recorded.map((s) => ({ code: s.code, server: explicit ?? s.server }));
      if (todo.length === 0) {
        if (json) outJson({ unpublished: [], gone: [], failed: [] });
        else out(`Nothing to unpublish: ${session.dir} recorded no share that has not expired.`);
        return 0;
      }
    }
    const vaultKey = await session.vaultKey();
    let secret;
    try {
      secret = identitySecret(session.dir, vaultKey);
    } finally {
      wipe(vaultKey);
    }
    const ed25519 = secret.ed25519;
    const sign = (bytes: Buffer): Buffer => {
      const sig = Buffer.alloc(64);
      sodium().crypto_sign_detached(sig, bytes, ed25519);
      return sig;
    };
    try {
      const { unpublish } = await import('../../keyserver/client.js');
      for (const t of todo) {
        try {
          const done = await unpublish(t.server, t.code, sign);
          outcomes.push({ ...t, deletedAt: done.deletedAt.toISOString() });
        } catch (err) {
          const c = errorCode(err) ?? 'ERROR';
          if (code !== undefined && !GONE.has(c)) throw err;
          outcomes.push(
            GONE.has(c) ? { ...t, gone: errorMessage(err) } : { ...t, error: { code: c, message: errorMessage(err) } },
          );
        }
      }
    } finally {
      wipe(secret.x25519);
      wipe(secret.ed25519);
    }
  } finally {
    const settled = outcomes.filter((o) => o.error === undefined).map((o) => o.code);
    try {
      if (settled.length > 0) forgetPublished(session.dir, settled);
    } catch (err) {
      note(`stash: the list of published shares could not be updated (${errorMessage(err)})`);
    }
    session.close();
  }
  return report(outcomes, json, code !== undefined);
}

function report(outcomes: Outcome[], json: boolean, single: boolean): number {
  const failed = outcomes.filter((o) => o.error !== undefined);
  if (json) {
    outJson({
      unpublished: outcomes
        .filter((o) => o.deletedAt !== undefined)
        .map((o) => ({ code: o.code, server: o.server, deletedAt: o.deletedAt })),
      gone: outcomes
        .filter((o) => o.gone !== undefined)
        .map((o) => ({ code: o.code, server: o.server, message: o.gone })),
      failed: failed.map((o) => ({ code: o.code, server: o.server, error: o.error })),
    });
  }
  for (const o of outcomes) {
    if (o.deletedAt !== undefined && !json)
      out(`Unpublished ${o.code} on ${o.server}: no server of its cluster hands it out any more.`);
    if (o.gone !== undefined && !json) out(`${o.code} on ${o.server}: already gone (${terminalSafe(o.gone)}).`);
    if (o.error !== undefined) note(`stash: ${o.code} on ${o.server}: ${terminalSafe(o.error.message)}`);
  }
  // One code already gone is that command's failure (as a fetch of it would be); with --all it is what was wanted.
  if (single && outcomes[0]?.gone !== undefined) return exitCodeFor('SHARE_EXPIRED');
  return failed.length > 0 ? exitCodeFor(failed[0]!.error!.code) : 0;
}
