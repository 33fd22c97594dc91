/**
 * `stash run --mask`: conceals secret values in a child's output. Works on
 * bytes, across chunk boundaries: the end of a chunk that could still be the
 * start of a secret is held back until the next chunk (or the end) decides.
 * Values shorter than MIN_MASKED_BYTES are not masked: masking "1" or "ok"
 * would garble ordinary output and hide nothing worth hiding.
 */
export const PLACEHOLDER = Buffer.from('<concealed by stash>');
export const MIN_MASKED_BYTES = 4;

export class Concealer {
  private readonly secrets: Buffer[];
  private pending = Buffer.alloc(0);

  constructor(secrets: readonly Buffer[]) {
    // Longest first, so a secret that contains another is concealed whole.
    this.secrets = secrets.filter((s) => s.length >= MIN_MASKED_BYTES).sort((a, b) => b.length - a.length);
  }

  /** The output that can be released now. */
  push(chunk: Buffer): Buffer {
    return this.scan(Buffer.concat([this.pending, chunk]), false);
  }

  /** Everything held back, at the end of the stream. */
  end(): Buffer {
    return this.scan(this.pending, true);
  }

  private scan(buf: Buffer, final: boolean): Buffer {
    const out: Buffer[] = [];
    let from = 0;
    let i = 0;
    outer: while (i < buf.length) {
      for (const s of this.secrets) {
        if (buf[i] !== s[0]) continue;
        const room = buf.length - i;
        if (room >= s.length) {
          if (buf.compare(s, 0, s.length, i, i + s.length) === 0) {
            out.push(buf.subarray(from, i), PLACEHOLDER);
            i += s.length;
            from = i;
            continue outer;
          }
        } else if (!final && buf.compare(s, 0, room, i, buf.length) === 0) {
          // Could be a secret cut by the chunk boundary: wait for more.
          out.push(buf.subarray(from, i));
          this.pending = Buffer.from(buf.subarray(i));
          return Buffer.concat(out);
        }
      }
      i++;
    }
    out.push(buf.subarray(from));
    this.pending = Buffer.alloc(0);
    return Buffer.concat(out);
  }
}
