/**
 * Export and import of a private container (format version 1): a copy of its
 * file, which stays readable by this vault alone. Its content key is wrapped
 * by the vault key, and its header names the vault and the container (both
 * bound into the encryption), so another vault cannot open it and this vault
 * imports it under the name it was exported with. What a single-container
 * backup is for: moving one container between copies of the same vault, or
 * keeping one aside (docs/cli.md).
 */
import { existsSync } from 'node:fs';
import { basename, resolve } from 'node:path';
import { decodeHeader, MAX_HEADER_BYTES } from './container-format.js';
import { MAX_BODY_BYTES } from './names.js';
import { readEntries, unwrapContentKey } from './containers.js';
import { wipeEntries } from './container-body.js';
import { VaultError } from './errors.js';
import { atomicWrite, readBounded, removeFile } from './fs-atomic.js';
import { withVaultLock } from './lock.js';
import { loadMeta } from './meta-file.js';
import { vaultPaths } from './paths.js';
import { wipe } from './secure.js';
import { containerVersion } from './sharing/format.js';
import { checkOutputPath, writeUserFile } from './user-file.js';

const MAX_FILE_BYTES = MAX_HEADER_BYTES + MAX_BODY_BYTES + 1024;

export interface PrivateTransfer {
  name: string;
  path: string;
  outcome: 'added' | 'updated' | 'unchanged';
}

function read(path: string): Buffer {
  const bytes = readBounded(
    path,
    MAX_FILE_BYTES,
    (size) =>
      new VaultError(
        'CONTAINER_CORRUPT',
        `${path} ${size < 0 ? 'is not a regular file' : 'is larger than any container can be'}`,
      ),
  );
  if (bytes === null) throw new VaultError('FILE_NOT_FOUND', `${path} does not exist`);
  return bytes;
}

/** True when the file at `path` is a private (version 1) container file. */
export function isPrivateContainerFile(path: string): boolean {
  try {
    return containerVersion(read(resolve(path))) === 1;
  } catch {
    return false;
  }
}

/** Copies private container `name` to `file` (0600); an existing file must be a copy of the same container. */
export function exportPrivate(dir: string, name: string, file: string): PrivateTransfer {
  const source = vaultPaths(dir).container(name);
  const bytes = read(source);
  const { header } = decodeHeader(bytes, source);
  const target = resolve(file);
  if (checkOutputPath(target) !== null) {
    const theirs = read(target);
    let same = false;
    try {
      same = decodeHeader(theirs, target).header.containerId.equals(header.containerId);
    } catch {
      same = false;
    }
    if (!same)
      throw new VaultError(
        'CONTAINER_EXISTS',
        `${target} exists and is not a copy of container ${name}; remove it or choose another file`,
      );
    if (theirs.equals(bytes)) return { name, path: target, outcome: 'unchanged' };
    writeUserFile(target, [bytes]);
    return { name, path: target, outcome: 'updated' };
  }
  writeUserFile(target, [bytes]);
  return { name, path: target, outcome: 'added' };
}

/**
 * Imports a private container file exported from this vault, under its own
 * name; checked by opening it with the vault key before it is kept.
 */
export function importPrivate(dir: string, vaultKey: Buffer, file: string): PrivateTransfer {
  const path = resolve(file);
  const bytes = read(path);
  const { header } = decodeHeader(bytes, path);
  const meta = loadMeta(dir);
  if (!header.vaultId.equals(meta.vaultId)) {
    throw new VaultError(
      'PERMISSION',
      `${basename(path)} is a private container of another vault: only the vault that exported it can import it`,
    );
  }
  const name = header.name;
  const target = vaultPaths(dir).container(name);
  return withVaultLock(dir, () => {
    let outcome: PrivateTransfer['outcome'] = 'added';
    let previous: Buffer | null = null;
    if (existsSync(target)) {
      previous = read(target);
      if (!decodeHeader(previous, target).header.containerId.equals(header.containerId)) {
        throw new VaultError(
          'CONTAINER_EXISTS',
          `this vault already has another container named ${name}; rename or remove it first`,
        );
      }
      if (previous.equals(bytes)) return { name, path, outcome: 'unchanged' };
      outcome = 'updated';
    }
    atomicWrite(target, [bytes]);
    try {
      const key = unwrapContentKey(dir, vaultKey, name);
      try {
        wipeEntries(readEntries(dir, name, key));
      } finally {
        wipe(key);
      }
    } catch (err) {
      // Not kept: put back what was there.
      if (previous) atomicWrite(target, [previous]);
      else removeFile(target);
      throw err;
    }
    return { name, path, outcome };
  });
}
