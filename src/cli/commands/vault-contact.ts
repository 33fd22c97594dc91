/**
 * `stash vault contact list | show NAME | remove NAME`. The contact list is
 * encrypted with the vault key, so each needs it (from the agent or the
 * password). Contacts are added by `contact receive` (vault-receive.ts), after a
 * fingerprint check.
 */
import { getContact, listContacts, removeContact, VaultError, wipe, type Contact } from '../../vault/index.js';
import { fingerprintLines } from '../../vault/fingerprint-display.js';
import { formatTable, out, outJson } from '../output.js';
import type { Invocation } from '../command-types.js';
import { Session } from '../session.js';

function contactJson(c: Contact): Record<string, unknown> {
  return {
    name: c.name,
    email: c.email,
    fingerprint: c.fingerprint,
    x25519: c.x25519.toString('hex'),
    ed25519: c.ed25519.toString('hex'),
    addedAt: c.addedAt,
    rotatedFrom: c.rotatedFrom.map((r) => ({ fingerprint: r.fingerprint, acceptedAt: r.acceptedAt })),
  };
}

export async function run(inv: Invocation): Promise<number> {
  const action = inv.command.path[2];
  const session = new Session(inv.values);
  try {
    const vaultKey = await session.vaultKey();
    try {
      if (action === 'list') return list(session.dir, vaultKey, inv.values.json === true);
      if (action === 'show') return show(session.dir, vaultKey, inv.positionals[0]!, inv.values.json === true);
      const name = inv.positionals[0]!;
      if (!removeContact(session.dir, vaultKey, name))
        throw new VaultError('CONTACT_NOT_FOUND', `no contact named ${JSON.stringify(name)}`);
      out(`Removed contact ${name}`);
      return 0;
    } finally {
      wipe(vaultKey);
    }
  } finally {
    session.close();
  }
}

function list(dir: string, vaultKey: Buffer, json: boolean): number {
  const contacts = listContacts(dir, vaultKey);
  if (json) {
    outJson(contacts.map(contactJson));
    return 0;
  }
  if (contacts.length === 0) {
    out('No contacts yet.');
    return 0;
  }
  for (const line of formatTable(
    ['NAME', 'EMAIL', 'FINGERPRINT', 'ADDED'],
    contacts.map((c) => [c.name, c.email, c.fingerprint, c.addedAt.slice(0, 10)]),
  ))
    out(line);
  return 0;
}

function show(dir: string, vaultKey: Buffer, name: string, json: boolean): number {
  const c = getContact(dir, vaultKey, name);
  if (json) {
    outJson(contactJson(c));
    return 0;
  }
  out(`Name:        ${c.name}`);
  out(`Email:       ${c.email}`);
  out(`Added:       ${c.addedAt}`);
  out(`Fingerprint: ${c.fingerprint}`);
  for (const line of fingerprintLines(c.fingerprint)) out(line);
  // Former keys, each replaced through a statement it signed (stash vault contact accept-rotation).
  for (const r of c.rotatedFrom) out(`Rotated from ${r.fingerprint} (statement accepted ${r.acceptedAt})`);
  return 0;
}
