/**
 * `stash vault contact receive CODE [--fingerprint FP] [--name NAME]`: fetches
 * a published key along the share's route, shows the verified address, and
 * adds the key as a contact only when its fingerprint matches the one the
 * publisher gave by another channel. The key server alone is never trusted:
 * a mismatch (a wrong key, or a typo in the fingerprint) adds nothing.
 */
import { StashError, UsageError } from '../../errors.js';
import {
  addContact,
  type Contact,
  decodePublicKey,
  fingerprintOf,
  fingerprintsEqual,
  formatFingerprint,
  listContacts,
  parseFingerprint,
  wipe,
} from '../../vault/index.js';
import { normalizeContactName } from '../../vault/contacts.js';
import { requireKeyServerUrl } from '../key-server-url.js';
import { note, out, outJson, terminalSafe } from '../output.js';
import { askLine, haveTerminal } from '../prompt.js';
import type { Invocation } from '../command-types.js';
import { Session } from '../session.js';
import { fetchAlongRoute, type RoutedShare } from '../../keyserver/routed-fetch.js';
import type { ShareCode } from '../../keyserver/share-code.js';
import type { CachedTopology } from '../topology-cache.js';

const TRIES = 3;

/** Fetches the share, checks the address and the fingerprint, adds the contact; the exit status. */
export async function run(inv: Invocation): Promise<number> {
  const json = inv.values.json === true;
  const { code, given } = await checkArguments(inv);
  const server = await requireKeyServerUrl(inv.values);
  const session = new Session(inv.values);
  try {
    const vaultKey = await session.vaultKey();
    try {
      const { routed, cached } = await fetchRouted(server.url, code.display);
      const { share } = routed;
      refuseOddEmail(share.email);
      const keys = decodePublicKey(share.publicKey);
      const fingerprint = formatFingerprint(fingerprintOf(keys.x25519, keys.ed25519));
      const name = typeof inv.values.name === 'string' ? inv.values.name : defaultName(share.email);
      // Asked at the terminal: a duplicate is refused before the question. Given
      // with --fingerprint: a mismatch is reported first (a wrong key matters more
      // than a name already taken), then a duplicate.
      if (given === null) refuseDuplicate(session.dir, vaultKey, name, fingerprint);
      showShare(routed, cached, server.url, json ? note : out);
      await confirmFingerprint(given, share.email, fingerprint);
      if (given !== null) refuseDuplicate(session.dir, vaultKey, name, fingerprint);
      const contact = addContact(session.dir, vaultKey, {
        name,
        email: share.email,
        x25519: keys.x25519,
        ed25519: keys.ed25519,
      });
      showAdded(json, routed, contact);
      return 0;
    } finally {
      wipe(vaultKey);
    }
  } finally {
    session.close();
  }
}

/**
 * The share code and the fingerprint given (null: to be asked at the terminal),
 * after every check that needs no request or prompt.
 */
async function checkArguments(inv: Invocation): Promise<{ code: ShareCode; given: string | null }> {
  const { parseShareCode } = await import('../../keyserver/share-code.js');
  const code = parseShareCode(inv.positionals[0]!);
  const given = typeof inv.values.fingerprint === 'string' ? inv.values.fingerprint : null;
  if (typeof inv.values.name === 'string') normalizeContactName(inv.values.name);
  if (given !== null) parseFingerprint(given);
  else if (!haveTerminal()) {
    throw new UsageError(
      "no terminal to ask for the publisher's fingerprint: give it with --fingerprint FP\nusage: stash vault contact receive CODE --fingerprint FP [--name NAME]",
    );
  }
  return { code, given };
}

/**
 * Fetches the share along the route. The topology learned earlier (doctor,
 * publish, receive) is the way to the failover when this server is down; one
 * a server gave is kept for next time.
 */
async function fetchRouted(
  serverUrl: string,
  code: string,
): Promise<{ routed: RoutedShare; cached: CachedTopology | null }> {
  const cache = await import('../topology-cache.js');
  const cached = cache.cachedTopologyFor([serverUrl]);
  const routed = await fetchAlongRoute(serverUrl, code, { cached: cached?.topology ?? null });
  if (routed.topologySource.kind === 'server')
    cache.saveTopology(routed.topology, routed.topologySource.url, [serverUrl]);
  return { routed, cached };
}

/** Refuses an address that is not a plain email address (nothing is added then). */
function refuseOddEmail(email: string): void {
  if (terminalSafe(email) !== email || !/^[^\s@]{1,64}@[^\s@]{1,253}$/.test(email)) {
    throw new StashError(
      'SERVER_PROTOCOL',
      'the key server sent an address that is not a plain email address; nothing was added',
    );
  }
}

/** Servers that did not answer (always on stderr), then the share: who published it, when, how often fetched. */
function showShare(
  routed: RoutedShare,
  cached: CachedTopology | null,
  serverUrl: string,
  show: (line: string) => void,
): void {
  const { share } = routed;
  if (routed.topologyError !== undefined) {
    const via =
      routed.topologySource.kind === 'server'
        ? `asked ${routed.topologySource.url}, a server of the same cluster it listed`
        : `used the topology of cluster ${routed.topology.clusterId} (version ${routed.topology.topologyVersion}) learned from ${cached?.learnedFrom ?? '?'} at ${cached?.savedAt ?? '?'}`;
    note(terminalSafe(`stash: ${serverUrl} did not answer (${routed.topologyError}); ${via}`));
  }
  for (const a of routed.attempts.filter((x) => x.error))
    note(
      terminalSafe(
        `stash: ${a.id === null ? 'the server' : `server ${a.id}`} ${a.url} did not answer (${a.error}); tried the next one on the route`,
      ),
    );
  show(`Share ${share.code} from ${routed.answeredBy.url}`);
  show(`Published by: ${share.email} (address verified ${share.verifiedAt.toISOString()})`);
  show(`Fetched:      ${share.fetchCount} time(s), this one included; expires ${share.expiresAt.toISOString()}`);
  if (share.fetchCount > 1)
    show('              (fetched before, by you or someone else; the fingerprint check below decides)');
}

/** Refuses the key unless its fingerprint is the one given (on the command line, or asked at the terminal). */
async function confirmFingerprint(given: string | null, email: string, fingerprint: string): Promise<void> {
  const matched = given !== null ? fingerprintsEqual(given, fingerprint) : await askFingerprint(email, fingerprint);
  if (!matched) {
    throw new StashError(
      'FINGERPRINT_MISMATCH',
      `fingerprint mismatch: the key published by ${email} is not the one whose fingerprint you were given; ` +
        'no contact was added. Check the fingerprint with the publisher by phone or in person, or ask for a new share.',
    );
  }
}

/** The contact added: two lines, or with --json the share, the servers tried and the contact. */
function showAdded(json: boolean, routed: RoutedShare, contact: Contact): void {
  const { share } = routed;
  if (!json) {
    out(`Fingerprint matches: ${contact.fingerprint}`);
    out(`Added contact ${contact.name} <${contact.email}>`);
    return;
  }
  outJson({
    code: share.code,
    server: routed.answeredBy.url,
    tried: routed.attempts.map((a) => ({ id: a.id, url: a.url, ...(a.error ? { error: a.error } : {}) })),
    email: share.email,
    verifiedAt: share.verifiedAt.toISOString(),
    fetchCount: share.fetchCount,
    expiresAt: share.expiresAt.toISOString(),
    fingerprint: contact.fingerprint,
    match: true,
    contact: {
      name: contact.name,
      email: contact.email,
      fingerprint: contact.fingerprint,
      addedAt: contact.addedAt,
    },
  });
}

/** The verified address, or its local part when the address is too long for a contact name. */
function defaultName(email: string): string {
  return email.length <= 64 ? email : email.slice(0, email.lastIndexOf('@')).slice(0, 64);
}

/** Refuses, before anything is written (and before asking for the fingerprint), what addContact would refuse anyway. */
function refuseDuplicate(dir: string, vaultKey: Buffer, name: string, fingerprint: string): void {
  const lower = name.normalize('NFC').trim().toLowerCase();
  for (const c of listContacts(dir, vaultKey)) {
    if (c.fingerprint === fingerprint)
      throw new StashError('CONTACT_EXISTS', `this key is already saved as contact ${JSON.stringify(c.name)}`);
    if (c.name.toLowerCase() === lower)
      throw new StashError(
        'CONTACT_EXISTS',
        `a contact named ${JSON.stringify(c.name)} already exists; choose another with --name`,
      );
  }
}

/**
 * Asks for the fingerprint on the terminal. A line that is not a fingerprint
 * at all (wrong length, impossible character) is asked again; a well-formed
 * but different fingerprint is a mismatch at once.
 */
async function askFingerprint(email: string, fingerprint: string): Promise<boolean> {
  for (let attempt = 1; ; attempt++) {
    const line = await askLine(`Fingerprint ${email} gave you (XXXX-XXXX-XXXX-XXXX-XXXX-XXXX): `);
    if (line === null) throw new UsageError('no terminal to ask for the fingerprint: give it with --fingerprint FP');
    try {
      parseFingerprint(line);
    } catch (err) {
      if (attempt >= TRIES) throw err;
      note(`${(err as Error).message}; try again.`);
      continue;
    }
    return fingerprintsEqual(line, fingerprint);
  }
}
