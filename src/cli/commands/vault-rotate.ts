/**
 * `stash vault identity rotate [--yes] [--json]`: new identity keys, a
 * statement signed by the old ones, every owned shared container re-sealed
 * (docs/vault.md, "Identity rotation"); and `stash vault identity statement
 * [--out FILE] [--json]`, which prints or writes the last statement once it
 * is checked against the key the vault key unlocks.
 */
import { StashError, UsageError } from '../../errors.js';
import {
  fingerprintOf,
  formatFingerprint,
  identityPublic,
  listContacts,
  readVaultInfo,
  wipe,
  type Contact,
} from '../../vault/index.js';
import { out, outJson, terminalSafe } from '../output.js';
import { askLine, haveTerminal } from '../prompt.js';
import type { Invocation } from '../command-types.js';
import { Session } from '../session.js';
import { checkOutputPath, writeUserFile } from '../../vault/user-file.js';

type Keys = { x25519: Buffer; ed25519: Buffer };
const fp = (k: Keys) => formatFingerprint(fingerprintOf(k.x25519, k.ed25519));

export async function run(inv: Invocation): Promise<number> {
  return inv.command.path[2] === 'statement' ? statement(inv) : rotate(inv);
}

async function rotate(inv: Invocation): Promise<number> {
  const json = inv.values.json === true;
  const session = new Session(inv.values);
  try {
    readVaultInfo(session.dir);
    if (inv.values.yes !== true) {
      if (!haveTerminal())
        throw new UsageError('identity rotate replaces your keys: confirm at a terminal, or give --yes');
      out(
        `This makes new identity keys for ${session.dir} (fingerprint now ${identityPublic(session.dir).fingerprint}).`,
      );
      out('Containers you own are re-sealed to the new keys; containers you are a member of cannot be opened');
      out('until their owners accept your rotation statement. Your contacts must accept it too.');
      const answer = await askLine('Rotate your identity? [y/N] ');
      if (answer === null || !/^y(es)?$/i.test(answer.trim())) {
        out('Nothing was changed.');
        return 1;
      }
    }
    // Always the password: a cached key only proves that someone unlocked the vault a while ago.
    const vaultKey = await session.vaultKeyFromPassword({ keyring: false });
    try {
      const { rotateIdentity } = await import('../../vault/rotation/index.js');
      const { containerInfo } = await import('../../vault/index.js');
      const r = rotateIdentity(session.dir, vaultKey);
      // The agent may hold the old content keys of the re-sealed containers: they open nothing now.
      for (const c of r.resealed)
        await session.forget(Buffer.from(containerInfo(session.dir, c.name).id, 'hex')).catch(() => {});
      const contacts = listContacts(session.dir, vaultKey);
      return report(r, contacts, json);
    } finally {
      wipe(vaultKey);
    }
  } finally {
    session.close();
  }
}

function ownerName(owner: Keys, contacts: Contact[]): string {
  const c = contacts.find((x) => x.ed25519.equals(owner.ed25519) && x.x25519.equals(owner.x25519));
  return c ? terminalSafe(c.name) : fp(owner);
}

function report(r: import('../../vault/rotation/index.js').RotationResult, contacts: Contact[], json: boolean): number {
  const actions = r.memberOf.map((m) => ({
    name: m.name,
    owner: ownerName(m.owner, contacts),
    ownerFingerprint: fp(m.owner),
    action:
      'accept your rotation statement: stash vault contact accept-rotation FILE (this re-seals the container to your new key)',
  }));
  if (json) {
    outJson({
      oldFingerprint: fp(r.old),
      fingerprint: fp(r.new),
      resumed: r.resumed,
      finished: r.finished,
      statement: r.statement,
      resealed: r.resealed,
      failed: r.failed,
      memberOf: actions,
    });
    return r.finished ? 0 : 1;
  }
  out(r.resumed ? 'Finished the rotation that was interrupted.' : 'Made new identity keys.');
  out(`Old fingerprint: ${fp(r.old)}`);
  out(`New fingerprint: ${fp(r.new)}`);
  out('');
  if (r.resealed.length > 0) {
    out('Re-sealed to your new keys (a new content key, signed by the new key):');
    for (const c of r.resealed) out(`  ${c.name}${c.revision === null ? ' (already)' : ` (version ${c.revision})`}`);
  } else {
    out('You own no shared containers; nothing was re-sealed.');
  }
  for (const f of r.failed) out(`Not re-sealed: ${f.name}: ${terminalSafe(f.error)}`);
  if (actions.length > 0) {
    out('');
    out('You are a member of these; you cannot open them until their owner re-seals them to your new key:');
    for (const a of actions)
      out(`  ${a.name}: ${a.owner} must run stash vault contact accept-rotation FILE with your statement`);
  }
  out('');
  if (!r.finished) {
    out(
      'Your old secret keys are kept until every container you own is re-sealed: fix the above and run stash vault identity rotate again.',
    );
  }
  out('Send your statement to each contact (stash vault identity statement --out FILE); they run');
  out('  stash vault contact accept-rotation FILE');
  out(
    'and take your new key without a fingerprint check. Publish the new key for anyone else (stash vault identity publish).',
  );
  return r.finished ? 0 : 1;
}

async function statement(inv: Invocation): Promise<number> {
  const file = typeof inv.values.out === 'string' ? inv.values.out : null;
  if (file !== null) checkOutputPath(file, { replace: false }); // refused before the password is asked
  const session = new Session(inv.values);
  let found: ReturnType<typeof import('../../vault/rotation/index.js').ownStatement>;
  try {
    readVaultInfo(session.dir);
    const vaultKey = await session.vaultKey();
    try {
      const { ownStatement } = await import('../../vault/rotation/index.js');
      // Checked against the key the vault key unlocks: the list itself is stored in the clear.
      found = ownStatement(session.dir, vaultKey);
    } finally {
      wipe(vaultKey);
    }
  } finally {
    session.close();
  }
  if (found === null)
    throw new StashError(
      'FILE_NOT_FOUND',
      `the identity of ${session.dir} was never rotated, so it has no rotation statement`,
    );
  const { text: last, statement: s } = found;
  // A new file only (0644: the statement is public); a name already there, of any kind, is refused.
  if (file !== null) writeUserFile(file, [Buffer.from(`${last}\n`)], { replace: false, mode: 0o644 });
  if (inv.values.json === true) {
    outJson({
      statement: last,
      oldFingerprint: fp(s.old),
      fingerprint: fp(s.new),
      createdAt: s.createdAt.toISOString(),
      ...(file ? { file } : {}),
    });
  } else if (file !== null) {
    out(`Wrote the rotation statement from ${fp(s.old)} to ${fp(s.new)} to ${file}`);
  } else {
    out(last);
  }
  return 0;
}
