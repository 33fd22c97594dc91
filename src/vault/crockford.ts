/**
 * Crockford base32, as people read and type it: fingerprints
 * (fingerprint-format.ts), recovery keys (recovery-key.ts) and the random
 * part of share codes (src/keyserver/share-code.ts) use this alphabet, which
 * leaves out I, L, O and U. Bytes are written 5 bits to a character, most
 * significant first; a last partial character is padded with zero bits.
 */

export const CROCKFORD_ALPHABET = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';

/** `bytes` as Crockford base32 characters (ceil(8n / 5) of them). */
export function encodeCrockford(bytes: Uint8Array): string {
  let out = '';
  let acc = 0;
  let bits = 0;
  for (const byte of bytes) {
    acc = ((acc << 8) | byte) & 0xffff;
    bits += 8;
    while (bits >= 5) {
      bits -= 5;
      out += CROCKFORD_ALPHABET[(acc >>> bits) & 31];
    }
  }
  if (bits > 0) out += CROCKFORD_ALPHABET[(acc << (5 - bits)) & 31];
  return out;
}

/**
 * Typed text as the characters of the alphabet it should hold: upper case,
 * without spaces or hyphens (any of the Unicode dashes a word processor puts
 * in their place), I and L read as 1, O as 0. Other characters stay, for the
 * caller to name.
 */
export function normaliseCrockford(text: string): string {
  return text
    .replace(/[\s\-\u2010-\u2015\u2212]/g, '')
    .toUpperCase()
    .replace(/[IL]/g, '1')
    .replace(/O/g, '0');
}

/**
 * Decodes characters of the alphabet (normaliseCrockford's output) into
 * `out`, filling it from the start; bits beyond out.length bytes are
 * ignored. Returns the index of the first character not in the alphabet
 * (`out` then partly written: the caller wipes it if it holds a secret), or -1.
 */
export function decodeCrockfordInto(chars: string, out: Uint8Array): number {
  let acc = 0;
  let bits = 0;
  let at = 0;
  for (let i = 0; i < chars.length; i++) {
    const v = CROCKFORD_ALPHABET.indexOf(chars[i]!);
    if (v < 0) return i;
    acc = ((acc << 5) | v) & 0xffff;
    bits += 5;
    if (bits >= 8) {
      bits -= 8;
      if (at < out.length) out[at++] = (acc >>> bits) & 0xff;
    }
  }
  return -1;
}
