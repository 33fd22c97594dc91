/**
 * Encoded "fetched" answers, cached per share. Of a fetched answer only the
 * fetch count changes from one fetch to the next; the rest (code, key, email,
 * times) is encoded once, on the first fetch of a share, and each later fetch
 * copies those bytes and writes the count in. The bytes are exactly those of
 * encodeShareResponse / shareResponseJson (test/keyserver/fast-fetch.test.ts).
 *
 * The cache is bounded (hot shares only): when full it is emptied and refills
 * with whatever is fetched next. An entry is used only while the share's
 * immutable fields are still the ones it was built from.
 *
 * An entry holds its bytes in buffers of its own (Buffer.allocUnsafeSlow), not
 * in slices of node's shared 8 KiB allocation pool: a cached slice would keep
 * its whole pool chunk alive, a few MB over a full cache (docs/operations.md,
 * "Memory").
 */
import { shareResponseJson } from './json.js';
import { encodeShareResponse, type FetchedResponse } from './messages.js';

export type FetchedEncoding = 'binary' | 'json';

interface Entry {
  publicKey: Uint8Array;
  email: string;
  verifiedAt: number;
  expiresAt: number;
  binary: Buffer | undefined;
  jsonHead: string | undefined;
  jsonTail: string | undefined;
}

const COUNT_FROM_END = 8 + 4; // u32 fetch_count, then u64 expires_at

export class FetchedCache {
  private readonly entries = new Map<string, Entry>();

  constructor(private readonly maxEntries = 1024) {}

  get size(): number {
    return this.entries.size;
  }

  /** The answer body for `res` (its display code names the share: one display form per code). */
  encode(res: FetchedResponse, encoding: FetchedEncoding): Buffer {
    const e = this.entry(res);
    if (encoding === 'binary') {
      e.binary ??= ownCopy(encodeShareResponse({ ...res, fetchCount: 0 }));
      const out = Buffer.allocUnsafe(e.binary.length);
      e.binary.copy(out);
      out.writeUInt32BE(res.fetchCount >>> 0, out.length - COUNT_FROM_END);
      return out;
    }
    if (e.jsonHead === undefined || e.jsonTail === undefined) {
      const text = JSON.stringify(shareResponseJson({ ...res, fetchCount: 0 }));
      // After the email: a quote inside a JSON string is always escaped, so this cannot match in it.
      const at = text.lastIndexOf(',"fetch_count":0,') + ',"fetch_count":'.length;
      e.jsonHead = text.slice(0, at);
      e.jsonTail = text.slice(at + 1);
    }
    return Buffer.from(`${e.jsonHead}${res.fetchCount}${e.jsonTail}`);
  }

  private entry(res: FetchedResponse): Entry {
    const e = this.entries.get(res.code);
    if (
      e !== undefined && e.verifiedAt === res.verifiedAt && e.expiresAt === res.expiresAt && e.email === res.email &&
      (e.publicKey === res.publicKey || Buffer.compare(e.publicKey, res.publicKey) === 0)
    ) {
      return e;
    }
    if (this.entries.size >= this.maxEntries) this.entries.clear();
    const fresh: Entry = {
      publicKey: ownCopy(res.publicKey), email: res.email, verifiedAt: res.verifiedAt, expiresAt: res.expiresAt,
      binary: undefined, jsonHead: undefined, jsonTail: undefined,
    };
    this.entries.set(res.code, fresh);
    return fresh;
  }
}

/** `bytes` in a buffer of its own (not a slice of node's allocation pool). */
function ownCopy(bytes: Uint8Array): Buffer {
  const out = Buffer.allocUnsafeSlow(bytes.length);
  out.set(bytes);
  return out;
}
