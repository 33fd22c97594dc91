/**
 * Share codes, pure (no I/O). A code is
 *
 *   L L R R R R R R R R R R R R C      displayed as  LL-RRRR-RRRR-RRRR-C
 *
 * - L L: the locator, two server indexes in base32hex (0-9 then a-v = 10..31):
 *   the primary (the server that took the publish) and its ring successor
 *   (the secondary). The locator alphabet is NOT Crockford's, so I/L/O/U keep
 *   their base32hex meaning there and are never folded.
 * - R x 12: 60 random bits in Crockford base32 (case-insensitive; I and L read
 *   as 1, O as 0; U is not used).
 * - C: a check symbol from the Damm algorithm over GF(32). Damm's quasigroup
 *   x*y = 2x + y (in GF(2^5), a = 2 not in {0,1}) is totally anti-symmetric, so
 *   EVERY single-symbol substitution and EVERY adjacent transposition changes
 *   the check: a mistyped code is reported as a typo, never looked up.
 *   (Crockford's own mod-37 check needs the symbols * ~ $ = which shells eat.)
 */
import { loadSodium } from '../native/sodium.js';
import { CROCKFORD_ALPHABET } from '../vault/crockford.js';
import { CodeTypoError } from './errors.js';

export { CROCKFORD_ALPHABET };
export const LOCATOR_ALPHABET = '0123456789abcdefghijklmnopqrstuv';
export const RANDOM_SYMBOLS = 12;
/** Length of the canonical form (no separators). */
export const CODE_LENGTH = 2 + RANDOM_SYMBOLS + 1;
const MAX_INPUT = 64;

export interface ShareCode {
  /** Storage key: upper case, no separators, aliases folded. */
  canonical: string;
  /** For people: `0A-7K3M-9QXD-W2HF-T`. */
  display: string;
  /** Index of the server that took the publish (0..31). */
  primary: number;
  /** Index of its successor in the ring (0..31). */
  secondary: number;
}

/** Multiplication in GF(2^5) modulo x^5 + x^2 + 1. */
function gfMul(a: number, b: number): number {
  let result = 0;
  let x = a;
  let y = b;
  while (y !== 0) {
    if (y & 1) result ^= x;
    y >>= 1;
    x <<= 1;
    if (x & 0x20) x ^= 0x25;
  }
  return result;
}

/** Damm interim after a sequence of symbol values (0..31). */
function damm(values: readonly number[]): number {
  let interim = 0;
  for (const v of values) interim = gfMul(2, interim) ^ v;
  return interim;
}

/** The check value for the 14 symbol values before it. */
export function checkValue(values: readonly number[]): number {
  // The check c makes the final interim zero: 2*interim ^ c = 0, so c = 2*interim.
  return gfMul(2, damm(values));
}

function format(canonical: string): string {
  const c = canonical;
  return `${c.slice(0, 2)}-${c.slice(2, 6)}-${c.slice(6, 10)}-${c.slice(10, 14)}-${c.slice(14)}`;
}

/** The locator character of a server index (0..31). */
export function locatorChar(index: number): string {
  const ch = LOCATOR_ALPHABET[index];
  if (!Number.isInteger(index) || ch === undefined) throw new RangeError(`server index out of range: ${index}`);
  return ch.toUpperCase();
}

/** The random bytes of the code being made (generation is synchronous: one buffer serves every call). */
const freshRandom = Buffer.alloc(RANDOM_SYMBOLS);

/**
 * libsodium's CSPRNG straight into a buffer: 0.7 us against 4.0 for
 * crypto.randomBytes(12) (2026-11-27). Loaded on first use: the CLI imports
 * this module to parse codes and must not open the addon for that.
 */
function fillRandom(): Uint8Array {
  loadSodium().randombytes_buf(freshRandom);
  return freshRandom;
}

/**
 * A fresh code for a share taken by `primary` whose ring successor is
 * `secondary`. `random` (12 bytes, tests only) replaces the CSPRNG.
 */
export function generateShareCode(primary: number, secondary: number, random: Uint8Array = fillRandom()): ShareCode {
  if (random.length < RANDOM_SYMBOLS) throw new RangeError('need 12 random bytes');
  const values = [
    LOCATOR_ALPHABET.indexOf(locatorChar(primary).toLowerCase()),
    LOCATOR_ALPHABET.indexOf(locatorChar(secondary).toLowerCase()),
  ];
  // 256 is a multiple of 32, so the low five bits of a uniform byte are uniform.
  for (let i = 0; i < RANDOM_SYMBOLS; i++) values.push(random[i]! & 31);
  values.push(checkValue(values));
  let canonical = locatorChar(primary) + locatorChar(secondary);
  for (let i = 2; i < CODE_LENGTH; i++) canonical += CROCKFORD_ALPHABET[values[i]!];
  return { canonical, display: format(canonical), primary, secondary };
}

/** Symbol values by character code, both cases (-1: not a symbol of that alphabet). */
function valueTable(alphabet: string, aliases: Record<string, number>): Int8Array {
  const table = new Int8Array(128).fill(-1);
  const set = (ch: string, v: number): void => {
    table[ch.toUpperCase().charCodeAt(0)] = v;
    table[ch.toLowerCase().charCodeAt(0)] = v;
  };
  for (let v = 0; v < alphabet.length; v++) set(alphabet[v]!, v);
  for (const [ch, v] of Object.entries(aliases)) set(ch, v);
  return table;
}

const LOCATOR_VALUE = valueTable(LOCATOR_ALPHABET, {});
const LOCATOR_UPPER = LOCATOR_ALPHABET.toUpperCase();
/** Crockford's aliases: I and L read as 1, O as 0. */
const CROCKFORD_VALUE = valueTable(CROCKFORD_ALPHABET, { I: 1, L: 1, O: 0 });
const DISPLAY_LENGTH = CODE_LENGTH + 4;
const HYPHEN = 0x2d;
/** Character codes of the two forms being built (parsing is synchronous: one pair serves every call). */
const canonicalChars = new Array<number>(CODE_LENGTH).fill(0);
const displayChars = new Array<number>(DISPLAY_LENGTH).fill(HYPHEN);
/** Position of canonical character i in the display form LL-RRRR-RRRR-RRRR-C. */
const displayAt = (i: number): number => (i < 2 ? i : i < 6 ? i + 1 : i < 10 ? i + 2 : i < 14 ? i + 3 : i + 4);

/**
 * Normalises what a person typed (any case, hyphens or spaces anywhere,
 * I/L/O aliases) and checks it. Every problem is a CodeTypoError whose
 * message says what is wrong, never which code would be right.
 * Called for every fetch, so it allocates only the strings it returns.
 */
export function parseShareCode(input: string): ShareCode {
  if (typeof input !== 'string') throw new CodeTypoError('a share code must be text');
  if (input.length > MAX_INPUT)
    throw new CodeTypoError(`this is too long for a share code (a code looks like ${example})`);
  const compact = input.replace(/[\s-]+/g, '');
  if (compact.length !== CODE_LENGTH) {
    throw new CodeTypoError(
      `this share code has a typo: it has ${compact.length} characters instead of ${CODE_LENGTH} (a code looks like ${example})`,
    );
  }
  let interim = 0;
  for (let i = 0; i < CODE_LENGTH; i++) {
    const c = compact.charCodeAt(i);
    const v = c < 128 ? (i < 2 ? LOCATOR_VALUE : CROCKFORD_VALUE)[c]! : -1;
    if (v < 0) {
      const allowed = i < 2 ? '0-9 and A-V' : 'digits and letters except U';
      throw new CodeTypoError(
        `this share code has a typo: character ${i + 1} (${JSON.stringify(compact[i])}) is not used there (${allowed})`,
      );
    }
    interim = gfMul(2, interim) ^ v;
    const out = (i < 2 ? LOCATOR_UPPER : CROCKFORD_ALPHABET).charCodeAt(v);
    canonicalChars[i] = out;
    displayChars[displayAt(i)] = out;
  }
  if (interim !== 0) throw new CodeTypoError();
  const primary = LOCATOR_VALUE[canonicalChars[0]!]!;
  const secondary = LOCATOR_VALUE[canonicalChars[1]!]!;
  return {
    canonical: String.fromCharCode(...canonicalChars),
    display: String.fromCharCode(...displayChars),
    primary,
    secondary,
  };
}

/** Distinct code spellings whose parse ParsedCodes remembers (about 200 bytes each). */
const PARSED_KEPT = 4096;

/**
 * parseShareCode, remembered for the codes fetched lately (bounded, emptied
 * when full): a hot share's code is parsed once. The fetch paths of the store's
 * process (service.ts) and of a fetch process (multi/remote-backend.ts) each
 * keep one.
 */
export class ParsedCodes {
  private readonly parsed = new Map<string, ShareCode>();

  /** The code `rawCode` spells; throws as parseShareCode does (a failed parse is not remembered). */
  parse(rawCode: string): ShareCode {
    let code = this.parsed.get(rawCode);
    if (code === undefined) {
      code = parseShareCode(rawCode);
      if (this.parsed.size >= PARSED_KEPT) this.parsed.clear();
      this.parsed.set(rawCode, code);
    }
    return code;
  }
}

const example = '0A-7K3M-9QXD-W2HF-Z';
