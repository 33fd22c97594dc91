/**
 * A copy of `bytes` in an ArrayBuffer of its own. Small Buffers that node
 * makes (Buffer.from, Buffer.allocUnsafe) are slices of a shared 8 KiB pool
 * slab, and a slice kept alive keeps the whole slab: a long-lived table of
 * 65-byte keys or 32-byte hashes made of slices can hold 8 KiB for each
 * entry. Copy with this whatever is kept for longer than a request.
 */
export function ownBytes(bytes: Uint8Array): Buffer {
  const out = Buffer.allocUnsafeSlow(bytes.length);
  out.set(bytes);
  return out;
}
