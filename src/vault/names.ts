/**
 * Names and size limits. Container names become file names, so they are held
 * to a portable, traversal-proof pattern (no separators, no leading dot, no
 * Windows device names). Entry names are paths (entry-path.ts); the names of
 * containers written before paths existed were environment-variable shaped.
 */
import { VaultError } from './errors.js';
import { describe } from './name-text.js';
import { validationCount } from './validation-count.js';

/** Container names: a letter or digit, then letters, digits, '.', '_', '-'; 1..64 chars. */
export const CONTAINER_NAME_RE = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
/** Entry names of a body written before paths (version 1): like environment variables; 1..128 chars. */
export const FLAT_NAME_RE = /^[A-Za-z_][A-Za-z0-9_]{0,127}$/;

/** Largest value of one entry. */
export const MAX_VALUE_BYTES = 64 * 1024;
/** Largest serialized body of one container (all names and values). */
export const MAX_BODY_BYTES = 1024 * 1024;
/** Most entries in one container. */
export const MAX_ENTRIES = 4096;

/**
 * Code-unit order, the order of sort() without a comparator, which every
 * listing uses. Not localeCompare: its first call loads ICU's collator, 17-23 ms.
 */
export function byCodeUnits(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

// CON, PRN, AUX, NUL, COM1-9, LPT1-9 cannot be file names on Windows, with or
// without an extension; refusing them everywhere keeps a vault portable.
const WINDOWS_DEVICE = /^(con|prn|aux|nul|com[1-9]|lpt[1-9])(\..*)?$/i;

declare const containerNameBrand: unique symbol;

/**
 * A container name that passed validateContainerName: made only by
 * parseContainerName (or that assertion), so a function that takes one need
 * not check it again. The CLI parses each name once, where it comes in
 * (src/cli/entry-target.ts), and passes this type down (docs/architecture.md).
 */
export type ContainerName = string & { readonly [containerNameBrand]: true };

/**
 * A container as the argument of a vault function: its name as text, checked
 * there (INVALID_NAME), or an object holding a name already checked (a
 * ContainerInfo, or `{ name }` of a ContainerName), which is not checked again.
 */
export type ContainerRef = string | { readonly name: ContainerName };

/** The checked name of `ref`: text is checked now, an object's name was checked when it was made. */
export function refName(ref: ContainerRef): ContainerName {
  return typeof ref === 'string' ? parseContainerName(ref) : ref.name;
}

/** `text` as a ContainerName; INVALID_NAME, saying why, unless it is a usable container name. */
export function parseContainerName(text: unknown): ContainerName {
  validateContainerName(text);
  return text;
}

/** `text` as a ContainerName, or null when it is none (a file name found in a folder, say). */
export function containerNameOrNull(text: string): ContainerName | null {
  try {
    return parseContainerName(text);
  } catch {
    return null;
  }
}

/** Throws INVALID_NAME unless `name` is a usable container name (then it is a ContainerName). */
export function validateContainerName(name: unknown): asserts name is ContainerName {
  validationCount.containerName++;
  if (typeof name !== 'string' || !CONTAINER_NAME_RE.test(name)) {
    throw new VaultError(
      'INVALID_NAME',
      `invalid container name ${describe(name)}: use 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit`,
    );
  }
  if (WINDOWS_DEVICE.test(name) || name.endsWith('.')) {
    throw new VaultError(
      'INVALID_NAME',
      `invalid container name ${describe(name)}: reserved as a file name on Windows`,
    );
  }
}

/** Throws CONTAINER_FULL unless `value` fits in one entry. */
export function validateValue(value: unknown, entryName: string): asserts value is Buffer {
  if (!Buffer.isBuffer(value)) {
    throw new VaultError('INVALID_ARGUMENT', `the value of ${entryName} must be a Buffer`);
  }
  if (value.length > MAX_VALUE_BYTES) {
    throw new VaultError(
      'CONTAINER_FULL',
      `the value of ${entryName} is ${value.length} bytes; the limit is ${MAX_VALUE_BYTES} bytes (64 KiB) per entry`,
    );
  }
}
