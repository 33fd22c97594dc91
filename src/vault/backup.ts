/**
 * `stash vault backup` / `restore`: one file holding every file of a vault
 * (vault.json, identity, contacts, every container, the shared containers'
 * records and last-write copies) and the contents of linked shared files.
 * Nothing is decrypted: the files are already encrypted under the vault key
 * (or sealed to the identity), so the backup needs the same password to be
 * of any use. A BLAKE2b MAC keyed by a key derived from the vault key covers
 * the whole file, so a restore proves the password and the integrity of
 * every byte before it writes anything. docs/vault.md gives the layout:
 *
 *   "STASHBK1"  8 bytes
 *   u32 BE      length of the manifest
 *   manifest    UTF-8 JSON: {version: 1, vaultId, createdAt, files: [{path, size}], links: [{name, path, size}]}
 *   data        the files' bytes in manifest order (files, then links)
 *   MAC         32 bytes: BLAKE2b-256, key = BLAKE2b-256("stash vault backup v1", key = vault key), of all bytes before it
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative, sep } from 'node:path';
import { VaultError } from './errors.js';
import { blake2b, constantTimeEqual, wipe } from './secure.js';
import { listRecords } from './sharing/records.js';

const MAGIC = Buffer.from('STASHBK1');
const MAC_BYTES = 32;
const MAX_MANIFEST_BYTES = 1 << 20;
/** A vault is small (64 KiB values, bounded containers); past this a file is not a backup of one. */
export const MAX_BACKUP_BYTES = 1 << 30;

export interface BackupManifest {
  version: 1;
  vaultId: string;
  createdAt: string;
  /** Paths relative to the vault folder, `/`-separated. */
  files: Array<{ path: string; size: number }>;
  /** Linked shared containers: their local name, the file's absolute path when backed up, its size. */
  links: Array<{ name: string; path: string; size: number }>;
}

export interface BackupContents {
  manifest: BackupManifest;
  files: Map<string, Buffer>;
  links: Map<string, Buffer>;
}

function macKey(vaultKey: Buffer): Buffer {
  return blake2b(32, Buffer.from('stash vault backup v1'), vaultKey);
}

function mac(vaultKey: Buffer, bytes: Buffer): Buffer {
  const key = macKey(vaultKey);
  try {
    return blake2b(MAC_BYTES, bytes, key);
  } finally {
    wipe(key);
  }
}

/** Every regular file under `dir` (relative, `/`-separated), temporary and lock files left out. */
function vaultFiles(dir: string): string[] {
  const out: string[] = [];
  const walk = (d: string): void => {
    for (const name of readdirSync(d).sort()) {
      const path = join(d, name);
      const st = statSync(path);
      if (st.isDirectory()) walk(path);
      else if (st.isFile() && !name.startsWith('.')) out.push(relative(dir, path).split(sep).join('/'));
    }
  };
  walk(dir);
  return out;
}

/** The backup of the vault at `dir` (the caller checked `vaultKey` against it). */
export function buildBackup(dir: string, vaultId: string, vaultKey: Buffer, now = new Date()): Buffer {
  const files = vaultFiles(dir).map((path) => ({ path, bytes: readFileSync(join(dir, ...path.split('/'))) }));
  const links: Array<{ name: string; path: string; bytes: Buffer }> = [];
  for (const r of listRecords(dir)) {
    if (!r.record?.link) continue;
    try {
      links.push({ name: r.name, path: r.record.link, bytes: readFileSync(r.record.link) });
    } catch (err) {
      throw new VaultError(
        'VAULT_IO',
        `cannot back up the linked file of ${r.name}, ${r.record.link}: ${(err as Error).message}; nothing was written (pull it, or unlink it first)`,
      );
    }
  }
  const manifest: BackupManifest = {
    version: 1,
    vaultId,
    createdAt: now.toISOString(),
    files: files.map((f) => ({ path: f.path, size: f.bytes.length })),
    links: links.map((l) => ({ name: l.name, path: l.path, size: l.bytes.length })),
  };
  const head = Buffer.from(JSON.stringify(manifest));
  const len = Buffer.alloc(4);
  len.writeUInt32BE(head.length);
  const body = Buffer.concat([MAGIC, len, head, ...files.map((f) => f.bytes), ...links.map((l) => l.bytes)]);
  return Buffer.concat([body, mac(vaultKey, body)]);
}

function corrupt(why: string): VaultError {
  return new VaultError('VAULT_CORRUPT', `not a stash vault backup, or a damaged one: ${why}`);
}

/** A path from a manifest: relative, `/`-separated, no `..`, no empty or hidden parts. */
function safePath(path: unknown): string {
  if (typeof path !== 'string' || path.length === 0 || path.length > 512)
    throw corrupt('a file path is missing or too long');
  for (const part of path.split('/')) {
    if (part === '' || part === '.' || part === '..' || part.startsWith('.') || /[\\\0]/.test(part))
      throw corrupt(`the file path ${JSON.stringify(path)} is not allowed`);
  }
  return path;
}

/**
 * Reads the layout of a backup (no key needed yet): the manifest and each
 * file's bytes. Everything is checked for shape; the MAC is checked by
 * verifyBackup once the vault key is known.
 */
export function parseBackup(bytes: Buffer): BackupContents {
  if (bytes.length < MAGIC.length + 4 + MAC_BYTES || !bytes.subarray(0, MAGIC.length).equals(MAGIC))
    throw corrupt('it does not start with STASHBK1');
  const headLen = bytes.readUInt32BE(MAGIC.length);
  if (headLen > MAX_MANIFEST_BYTES || MAGIC.length + 4 + headLen + MAC_BYTES > bytes.length)
    throw corrupt('the manifest length is out of range');
  let manifest: BackupManifest;
  try {
    manifest = JSON.parse(
      bytes.subarray(MAGIC.length + 4, MAGIC.length + 4 + headLen).toString('utf8'),
    ) as BackupManifest;
  } catch {
    throw corrupt('the manifest is not JSON');
  }
  if (
    manifest?.version !== 1 ||
    typeof manifest.vaultId !== 'string' ||
    !Array.isArray(manifest.files) ||
    !Array.isArray(manifest.links)
  )
    throw corrupt('the manifest has the wrong shape');
  let at = MAGIC.length + 4 + headLen;
  const end = bytes.length - MAC_BYTES;
  const take = (size: unknown): Buffer => {
    if (!Number.isSafeInteger(size) || (size as number) < 0 || at + (size as number) > end)
      throw corrupt('a file size is out of range');
    const out = bytes.subarray(at, at + (size as number));
    at += size as number;
    return out;
  };
  const files = new Map<string, Buffer>();
  for (const f of manifest.files) {
    const path = safePath(f?.path);
    if (files.has(path)) throw corrupt(`${path} is listed twice`);
    files.set(path, take(f.size));
  }
  const links = new Map<string, Buffer>();
  for (const l of manifest.links) {
    if (typeof l?.name !== 'string' || typeof l.path !== 'string')
      throw corrupt('a linked file entry has the wrong shape');
    links.set(l.name, take(l.size));
  }
  if (at !== end) throw corrupt('there are bytes the manifest does not account for');
  if (!files.has('vault.json')) throw corrupt('it holds no vault.json');
  return { manifest, files, links };
}

/** Checks the MAC with the vault key unwrapped from the backup's own vault.json (wrong password: WRONG_PASSWORD before this). */
export function verifyBackup(bytes: Buffer, vaultKey: Buffer): void {
  const body = bytes.subarray(0, bytes.length - MAC_BYTES);
  if (!constantTimeEqual(mac(vaultKey, body), bytes.subarray(bytes.length - MAC_BYTES))) {
    throw new VaultError(
      'VAULT_CORRUPT',
      'the backup was modified or damaged after it was made (its MAC does not match); nothing was restored',
    );
  }
}
