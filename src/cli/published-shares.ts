/**
 * The shares this vault published and has not seen expire or unpublished:
 * `<vault>/published.json`, so that `stash vault identity unpublish --all`
 * knows which codes to delete. The server keeps no list of an identity's
 * shares and offers none (a list would tell whoever can sign, or replay a
 * signed request, every code of the identity).
 *
 * It holds no secret: per share the code, the server that took the publish,
 * the address and the expiry, as `publish --json` prints them. Still written
 * owner-only (0600), atomically. Expired entries are dropped whenever the file
 * is written. A damaged file reads as empty, and a failure to write it is a
 * warning, never a failed publish: the list only adds `--all`; a code can
 * always be unpublished by name. Shares published from another copy of the
 * vault are not in this copy's list.
 */
import { join } from 'node:path';
import { atomicWrite, readBounded } from '../vault/fs-atomic.js';
import { VaultError } from '../vault/errors.js';

export const PUBLISHED_FILE = 'published.json';
const FORMAT = 'stash-published';
const MAX_BYTES = 256 * 1024;
/** Entries kept at most (the oldest go first): a long-lived organisation TTL could otherwise grow it for ever. */
const MAX_ENTRIES = 1000;

export interface PublishedShare {
  /** Display form, e.g. 01-7K3M-9QXD-W2HF-5. */
  code: string;
  /** The key server URL the share was published on. */
  server: string;
  email: string;
  /** ISO 8601. */
  expiresAt: string;
}

const path = (vaultDir: string) => join(vaultDir, PUBLISHED_FILE);

function valid(e: unknown): e is PublishedShare {
  const s = e as Record<string, unknown>;
  return (
    typeof s === 'object' &&
    s !== null &&
    typeof s.code === 'string' &&
    typeof s.server === 'string' &&
    typeof s.email === 'string' &&
    typeof s.expiresAt === 'string' &&
    Number.isFinite(Date.parse(s.expiresAt))
  );
}

/** Every recorded share not expired at `now`, oldest first. */
export function readPublished(vaultDir: string, now = Date.now()): PublishedShare[] {
  let bytes: Buffer | null;
  try {
    bytes = readBounded(
      path(vaultDir),
      MAX_BYTES,
      () => new VaultError('VAULT_CORRUPT', `${path(vaultDir)} is too large`),
    );
  } catch {
    return [];
  }
  if (bytes === null) return [];
  try {
    const doc = JSON.parse(bytes.toString('utf8')) as { format?: unknown; shares?: unknown };
    if (doc.format !== FORMAT || !Array.isArray(doc.shares)) return [];
    return doc.shares.filter(valid).filter((s) => Date.parse(s.expiresAt) > now);
  } catch {
    return [];
  }
}

function write(vaultDir: string, shares: PublishedShare[]): void {
  const doc = { format: FORMAT, formatVersion: 1, shares: shares.slice(-MAX_ENTRIES) };
  atomicWrite(path(vaultDir), [Buffer.from(`${JSON.stringify(doc, null, 2)}\n`)]);
}

/** Records a share just published (the expired ones go). */
export function recordPublished(vaultDir: string, share: PublishedShare): void {
  write(vaultDir, [...readPublished(vaultDir).filter((s) => s.code !== share.code), share]);
}

/** Forgets `codes` (display form): unpublished, or gone from the server. */
export function forgetPublished(vaultDir: string, codes: readonly string[]): void {
  const left = readPublished(vaultDir).filter((s) => !codes.includes(s.code));
  write(vaultDir, left);
}
