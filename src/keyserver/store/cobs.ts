/**
 * Consistent Overhead Byte Stuffing (Cheshire and Baker, 1999): a frame is
 * rewritten without any 0x00 byte, so a 0x00 written after it marks where it
 * ends, and nothing inside any record (a public key, an address: bytes a
 * publisher chooses) can ever look like a record boundary. The store log uses
 * it so that recovery can resynchronise at the next 0x00 after a damaged
 * record without ever taking bytes from inside a value for a record
 * (docs/key-server.md, "Store format").
 *
 * Encoding: groups of `code` followed by `code - 1` non-zero bytes; a group
 * with code < 0xFF stands for its bytes and then a 0x00, except the last
 * group of the frame. This encoder never ends with an empty group after a
 * full (0xFF) one, so a frame's encoding ends exactly where its last data
 * byte is decoded: decodeFrame relies on that to find a frame whose
 * delimiter was damaged.
 */

/** The most bytes encoding `n` bytes can take (without the delimiter). */
export function encodedBound(n: number): number {
  return n + Math.ceil(n / 254) + 1;
}

/** Encodes `src` into `out` at `at`; returns the end offset. `out` needs encodedBound(src.length) bytes. */
export function cobsEncode(src: Uint8Array, out: Uint8Array, at: number): number {
  let codeAt = at;
  let o = at + 1;
  let code = 1;
  const n = src.length;
  for (let i = 0; i < n; i++) {
    const b = src[i]!;
    if (b === 0) {
      out[codeAt] = code;
      codeAt = o++;
      code = 1;
      continue;
    }
    out[o++] = b;
    code++;
    if (code === 0xff && i !== n - 1) {
      out[codeAt] = code;
      codeAt = o++;
      code = 1;
    }
  }
  out[codeAt] = code;
  return o;
}

export type Decoded =
  /** A frame of `size` bytes is in `out`; its encoding took `used` bytes of the segment. */
  { ok: true; size: number; used: number } | { ok: false; reason: string };

/**
 * Decodes the start of `seg` (bytes up to, not including, a 0x00) into
 * `out` until it holds one whole frame, whose size the frame's own length
 * field gives (u32 big-endian: `frameSize(length)` bytes in all). Fails
 * when the length is impossible, the groups are malformed, the segment ends
 * first, or the frame does not end on a group boundary. The caller checks
 * the frame's checksum, and whether `used` is the whole segment.
 */
export function decodeFrame(
  seg: Uint8Array,
  out: Uint8Array,
  frameSize: (length: number) => number | undefined,
): Decoded {
  const n = seg.length;
  let i = 0;
  let o = 0;
  let need = -1;
  const settle = (): Decoded | undefined => {
    if (need < 0 && o >= 4) {
      const length = ((out[0]! << 24) >>> 0) + (out[1]! << 16) + (out[2]! << 8) + out[3]!;
      const size = frameSize(length);
      if (size === undefined) return { ok: false, reason: `impossible record length ${length}` };
      need = size;
    }
    if (need >= 0 && o > need) return { ok: false, reason: 'the record does not end where its length says' };
    return undefined;
  };
  while (i < n) {
    const code = seg[i++]!;
    if (code === 0) return { ok: false, reason: 'bad encoding' };
    const end = i + code - 1;
    if (end > n) return { ok: false, reason: 'bad encoding' };
    if (o + (end - i) > out.length) return { ok: false, reason: 'the record does not end where its length says' };
    // Groups are short (a record is mostly small numbers): a loop beats subarray() + set().
    while (i < end) out[o++] = seg[i++]!;
    const bad = settle();
    if (bad) return bad;
    if (o === need) return { ok: true, size: need, used: i };
    if (code < 0xff && i < n) {
      if (o >= out.length) return { ok: false, reason: 'the record does not end where its length says' };
      out[o++] = 0;
      const worse = settle();
      if (worse) return worse;
    }
  }
  return { ok: false, reason: need < 0 ? 'a record cut short' : `a record cut short (${o} of ${need} bytes)` };
}
