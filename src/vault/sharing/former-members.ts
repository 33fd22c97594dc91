/**
 * Former members of a shared container, as this vault (the owner's, which
 * ran the unshare) remembers them: `<vault>/shared/<name>.former.json`, one
 * entry per removal with the member's public keys and the removal time.
 * No entry names are kept: the container's names live only in its encrypted
 * body. What a former member could read is worked out when asked, from the
 * entries' change times (exposure.ts): an entry unchanged since the removal
 * still holds a value they could open.
 */
import { join } from 'node:path';
import { VaultError } from '../errors.js';
import { atomicWrite, ensureDir, readBounded } from '../fs-atomic.js';
import { byCodeUnits, validateContainerName } from '../names.js';
import { sharedDir } from './records.js';

export interface FormerMember {
  x25519: Buffer;
  ed25519: Buffer;
  /** When this vault removed them, ms since 1970. */
  removedAt: number;
  /** The last version they could open. */
  lastRevision: number;
}

const MAX_BYTES = 256 * 1024;

function pathOf(dir: string, name: string): string {
  validateContainerName(name);
  return join(sharedDir(dir), `${name}.former.json`);
}

export function readFormerMembers(dir: string, name: string): FormerMember[] {
  const path = pathOf(dir, name);
  const bytes = readBounded(
    path,
    MAX_BYTES,
    () => new VaultError('VAULT_CORRUPT', `${path} is not a small regular file`),
  );
  if (bytes === null) return [];
  try {
    const doc = JSON.parse(bytes.toString('utf8')) as {
      format: string;
      members: Array<{ x25519: string; ed25519: string; removedAt: string; lastRevision: number }>;
    };
    if (doc.format !== 'stash-former-members' || !Array.isArray(doc.members)) throw new Error('wrong shape');
    return doc.members.map((m) => {
      const removedAt = Date.parse(m.removedAt);
      if (
        !/^[0-9a-f]{64}$/.test(m.x25519) ||
        !/^[0-9a-f]{64}$/.test(m.ed25519) ||
        Number.isNaN(removedAt) ||
        !Number.isSafeInteger(m.lastRevision)
      )
        throw new Error('bad member');
      return {
        x25519: Buffer.from(m.x25519, 'hex'),
        ed25519: Buffer.from(m.ed25519, 'hex'),
        removedAt,
        lastRevision: m.lastRevision,
      };
    });
  } catch (err) {
    throw new VaultError('VAULT_CORRUPT', `${path} is damaged: ${(err as Error).message}`);
  }
}

/** Adds removed members (a member removed again replaces their older entry). */
export function recordFormerMembers(
  dir: string,
  name: string,
  removed: Array<{ x25519: Buffer; ed25519: Buffer }>,
  lastRevision: number,
  now = Date.now(),
): void {
  const kept = readFormerMembers(dir, name).filter((f) => !removed.some((r) => r.ed25519.equals(f.ed25519)));
  const all = [
    ...kept,
    ...removed.map((r) => ({ x25519: r.x25519, ed25519: r.ed25519, removedAt: now, lastRevision })),
  ];
  ensureDir(sharedDir(dir));
  const doc = {
    format: 'stash-former-members',
    members: all.map((m) => ({
      x25519: m.x25519.toString('hex'),
      ed25519: m.ed25519.toString('hex'),
      removedAt: new Date(m.removedAt).toISOString(),
      lastRevision: m.lastRevision,
    })),
  };
  atomicWrite(pathOf(dir, name), [Buffer.from(`${JSON.stringify(doc, null, 2)}\n`)]);
}

/**
 * The entries `m` could read and that still hold the same value: every entry
 * whose last change is not after the removal (an unknown change time counts
 * as exposed). Names and change times only.
 */
export function exposedEntries(
  m: FormerMember,
  entries: Iterable<{ name: string; changedAt: number }>,
): Array<{ name: string; changedAt: number }> {
  return [...entries]
    .filter((e) => e.changedAt === 0 || e.changedAt <= m.removedAt)
    .sort((a, b) => byCodeUnits(a.name, b.name));
}
