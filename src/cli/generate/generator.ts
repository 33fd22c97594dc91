/**
 * Random passwords and passphrases, written straight into sodium secure
 * memory (never a JavaScript string). Each character or word is chosen with
 * libsodium's randombytes_uniform, which draws again when a 32-bit value
 * falls in the short last stretch that would bias a plain modulo (rejection
 * sampling), so every character of the set is equally likely.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { UsageError } from '../../errors.js';
import { packageRoot } from '../../native/binding.js';
import { secureAlloc, wipe } from '../../vault/secure.js';
import { sodium } from '../../vault/sodium.js';

export const DEFAULT_LENGTH = 24;
export const MAX_LENGTH = 4096;
export const MAX_WORDS = 64;

/** An integer in [0, upper), uniform (libsodium's rejection sampling). */
export function uniform(upper: number): number {
  return sodium().randombytes_uniform(upper);
}

/** `length` characters of `charset`, in secure memory (release with wipe()). */
export function generatePassword(charset: string, length: number): Buffer {
  // The CLI caps --length at MAX_LENGTH (options.ts); tests draw far more at once.
  if (!Number.isInteger(length) || length < 1)
    throw new UsageError(`a password needs a whole number of characters, got ${length}`);
  const out = secureAlloc(length);
  for (let i = 0; i < length; i++) out[i] = charset.charCodeAt(uniform(charset.length));
  return out;
}

let words: string[] | null = null;

/** The EFF long word list shipped in assets/wordlists (its README gives the source and licence). */
export function wordList(): string[] {
  words ??= readFileSync(join(packageRoot, 'assets', 'wordlists', 'eff-large.txt'), 'utf8')
    .split('\n')
    .filter((w) => w.length > 0);
  return words;
}

/** `count` words of the list joined by `separator`, in secure memory (release with wipe()). */
export function generatePassphrase(count: number, separator: string): Buffer {
  if (!Number.isInteger(count) || count < 1 || count > MAX_WORDS)
    throw new UsageError(`--words must be a whole number from 1 to ${MAX_WORDS}`);
  const list = wordList();
  const picks = Array.from({ length: count }, () => list[uniform(list.length)]!);
  const sep = Buffer.from(separator);
  const size = picks.reduce((n, w) => n + w.length, 0) + sep.length * (count - 1);
  const out = secureAlloc(size);
  let at = 0;
  picks.forEach((w, i) => {
    if (i > 0) at += sep.copy(out, at);
    at += out.write(w, at, 'ascii');
  });
  picks.fill('');
  return out;
}

/** Bits of entropy of a password of `length` from `setSize` symbols. */
export function entropyBits(setSize: number, length: number): number {
  return Math.floor(length * Math.log2(setSize) * 10) / 10;
}

export { wipe };
