/**
 * The templates of `stash inject`: every `{{ stash://CONTAINER/NAME }}` found
 * in one pass, each distinct reference parsed once, and the filled text
 * assembled straight into one secure buffer of exactly its size. Time is
 * linear in the template and memory is the template, its filled copy and
 * three small integers per reference: a million references (a 16 MB
 * template) take about as long per reference as ten thousand
 * (bench/inject-scaling.js, docs/benchmarks.md). No I/O.
 */
import { isAscii } from 'node:buffer';
import type { SecureBuffer } from '../../vault/sodium.js';
import { secureAlloc } from '../../vault/secure.js';
import { parseRef, type SecretRef } from './reference.js';

const TEMPLATE_RE = /\{\{\s*(stash:\/\/[^\s}]*)\s*\}\}/g;

/** What scanTemplate() found. */
export interface TemplateScan {
  /** The distinct references as written, in order of first use. */
  refs: SecretRef[];
  /** How many references the template holds. */
  count: number;
  /**
   * Three numbers per reference, `count` of them: where it starts and ends in
   * the template (UTF-16 offsets) and its index in `refs`. Typed: 12 bytes a
   * reference, where a plain array took twice that and more CPU.
   */
  spans: Int32Array;
}

/** Every `{{ stash://... }}` in `template`, in order (a malformed one is a usage error). */
export function scanTemplate(template: string): TemplateScan {
  const refs: SecretRef[] = [];
  const indexOf = new Map<string, number>();
  let spans = new Int32Array(3 * 64);
  let k = 0;
  const re = new RegExp(TEMPLATE_RE);
  for (let m = re.exec(template); m !== null; m = re.exec(template)) {
    const text = m[1]!;
    let i = indexOf.get(text);
    if (i === undefined) {
      i = refs.push(parseRef(text)) - 1;
      indexOf.set(text, i);
    }
    if (k === spans.length) {
      const grown = new Int32Array(spans.length * 2);
      grown.set(spans);
      spans = grown;
    }
    spans[k++] = m.index;
    spans[k++] = re.lastIndex;
    spans[k++] = i;
  }
  return { refs, count: k / 3, spans: spans.subarray(0, k) };
}

/**
 * The template with every reference replaced by its value, in a secure
 * buffer (wipe() it). `bytes` is the template as read and `template` its
 * UTF-8 decoding; `values[i]` is the value of `scan.refs[i]`.
 */
export function fillTemplate(
  bytes: Buffer,
  template: string,
  scan: TemplateScan,
  values: readonly Buffer[],
): SecureBuffer {
  const { spans } = scan;
  // ASCII: offsets in the string are offsets in the bytes, so the text between
  // references is copied from them. Otherwise each piece is encoded again, as
  // the whole template would be (a malformed sequence becomes U+FFFD).
  const ascii = isAscii(bytes);
  const gapBytes = (from: number, to: number): number =>
    ascii ? to - from : Buffer.byteLength(template.slice(from, to));
  let size = 0;
  let at = 0;
  for (let k = 0; k < spans.length; k += 3) {
    size += gapBytes(at, spans[k]!) + values[spans[k + 2]!]!.length;
    at = spans[k + 1]!;
  }
  size += gapBytes(at, template.length);
  const filled = secureAlloc(size);
  const gap = (from: number, to: number, off: number): number =>
    ascii ? bytes.copy(filled, off, from, to) : filled.write(template.slice(from, to), off);
  let off = 0;
  at = 0;
  for (let k = 0; k < spans.length; k += 3) {
    off += gap(at, spans[k]!, off);
    off += values[spans[k + 2]!]!.copy(filled, off);
    at = spans[k + 1]!;
  }
  gap(at, template.length, off);
  return filled;
}
