/**
 * Encoded "fetched" answers, cached per share. Of a fetched answer only the
 * fetch count changes from one fetch to the next; the rest (code, key, email,
 * times) is encoded once, on the second fetch of a version of a share (the
 * first is encoded the same way and kept nowhere: see `seen`), as the bytes
 * before and after the count, and each later fetch puts the count between
 * them. The bytes are exactly those of encodeShareResponse /
 * shareResponseJson (test/keyserver/fetch-paths.test.ts).
 *
 * Answers are strings of one character per byte (latin1), which node:http
 * writes as they are, in one write with the status line and headers; a fetch
 * allocates no Buffer (docs/benchmarks.md, "Fetch beside bare node:http").
 *
 * An entry keeps its own copy of the key (ownBytes): a key read from the
 * store is a slice of node's Buffer pool, and 1,024 cached slices kept about
 * 8 MB of pool slabs alive.
 *
 * The cache is bounded (hot shares only): when full it is emptied and refills
 * with whatever is fetched next. An entry is used only while the share's
 * version (its stamp, verification and expiry times) is the one it was built
 * from: any change of a share but its fetch count gives it a new stamp.
 */
import {
  PEEK_EXPIRES_AT,
  PEEK_STAMP_EPOCH,
  PEEK_STAMP_ORIGIN,
  PEEK_STAMP_SEQ,
  PEEK_VERIFIED_AT,
} from '../store/share-table.js';
import { ownBytes } from '../own-bytes.js';
import { shareResponseJson } from './json.js';
import { encodeShareResponse, type FetchedResponse } from './messages.js';

export type FetchedEncoding = 'binary' | 'json';

/** What a fetched answer says besides the count (FetchedResponse without it). */
export type FetchedFacts = Omit<FetchedResponse, 'fetchCount'>;

/** The facts of a live share, as the store (service.ts) or a fetch process's copy (multi/replica.ts) holds it. */
export function factsOf(
  display: string,
  s: Pick<FetchedResponse, 'publicKey' | 'email' | 'verifiedAt' | 'expiresAt'>,
): FetchedFacts {
  return {
    type: 'fetched',
    code: display,
    publicKey: s.publicKey,
    email: s.email,
    verifiedAt: s.verifiedAt,
    expiresAt: s.expiresAt,
  };
}

interface Entry {
  epoch: number;
  seq: number;
  origin: number;
  verifiedAt: number;
  expiresAt: number;
  facts: FetchedFacts;
  binHead: string | undefined;
  binTail: string;
  jsonHead: string | undefined;
  jsonTail: string;
}

const COUNT_FROM_END = 8 + 4; // u32 fetch_count, then u64 expires_at
const JSON_COUNT = ',"fetch_count":';

/** `facts` with the key in memory of its own, not a slice of a pool slab. */
function kept(facts: FetchedFacts): FetchedFacts {
  return { ...facts, publicKey: ownBytes(facts.publicKey) };
}

/** A u32 as four latin1 characters, big-endian. */
function u32Chars(n: number): string {
  return String.fromCharCode((n >>> 24) & 0xff, (n >>> 16) & 0xff, (n >>> 8) & 0xff, n & 0xff);
}

/** Slots of the doorkeeper (a power of two): codes fetched once lately, by hash. */
const SEEN_SLOTS = 4096;

/** FNV-1a over the UTF-16 code units of `code`. */
function codeHash(code: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < code.length; i++) h = Math.imul(h ^ code.charCodeAt(i), 0x01000193);
  return h;
}

export class FetchedCache {
  private readonly entries = new Map<string, Entry>();
  /**
   * The doorkeeper: a share enters the cache on its second fetch, not its
   * first. Most shares are fetched once or twice (B fetches A's key), and an
   * entry made for a share never fetched again lived long enough to reach
   * V8's old generation: under a load of distinct shares the cache turned
   * over its 1,024 entries many times a second, and the old generation grew
   * with their garbage (docs/benchmarks.md, "Memory"). A slot (the hash's
   * low bits) holds the hash of the last code seen there, with its lowest bit
   * set so that no hash reads as the empty slot's 0. Two codes of one slot
   * push each other out (a share then waits for a later fetch to enter); two
   * codes of one hash admit each other early. Either only moves when a share
   * enters, never what is answered.
   */
  private readonly seen = new Int32Array(SEEN_SLOTS);

  constructor(private readonly maxEntries = 1024) {}

  get size(): number {
    return this.entries.size;
  }

  /**
   * The answer body, one character per byte, for fetch number `count` of the
   * share `canonical` whose version is in `version` (ShareTable.peek's
   * numbers). `facts` is called only when the cache has no entry for that
   * version.
   */
  body(
    canonical: string,
    version: Float64Array,
    count: number,
    encoding: FetchedEncoding,
    facts: () => FetchedFacts,
  ): string {
    let e = this.entries.get(canonical);
    if (e === undefined) {
      const h = codeHash(canonical);
      const slot = h & (SEEN_SLOTS - 1);
      const mark = h | 1;
      if (this.seen[slot] !== mark) {
        this.seen[slot] = mark;
        return render(entryOf(facts()), count, encoding);
      }
    }
    if (
      e === undefined ||
      e.seq !== version[PEEK_STAMP_SEQ] ||
      e.epoch !== version[PEEK_STAMP_EPOCH] ||
      e.origin !== version[PEEK_STAMP_ORIGIN] ||
      e.verifiedAt !== version[PEEK_VERIFIED_AT] ||
      e.expiresAt !== version[PEEK_EXPIRES_AT]
    ) {
      if (this.entries.size >= this.maxEntries) this.entries.clear();
      e = entryOf(kept(facts()), version);
      this.entries.set(canonical, e);
    }
    return render(e, count, encoding);
  }

  /** The answer to `res` as bytes, built without the cache (tests compare it with the plain encoders). */
  static encode(res: FetchedResponse, encoding: FetchedEncoding): Buffer {
    const { fetchCount, ...facts } = res;
    return Buffer.from(render(entryOf(facts), fetchCount, encoding), 'latin1');
  }
}

/** An entry for `facts` of the share version in `version` (ShareTable.peek's numbers); without one, for one answer kept nowhere. */
function entryOf(facts: FetchedFacts, version?: Float64Array): Entry {
  return {
    epoch: version?.[PEEK_STAMP_EPOCH] ?? 0,
    seq: version?.[PEEK_STAMP_SEQ] ?? 0,
    origin: version?.[PEEK_STAMP_ORIGIN] ?? 0,
    verifiedAt: version?.[PEEK_VERIFIED_AT] ?? 0,
    expiresAt: version?.[PEEK_EXPIRES_AT] ?? 0,
    facts,
    binHead: undefined,
    binTail: '',
    jsonHead: undefined,
    jsonTail: '',
  };
}

function render(e: Entry, count: number, encoding: FetchedEncoding): string {
  if (encoding === 'binary') {
    if (e.binHead === undefined) {
      const bytes = encodeShareResponse({ ...e.facts, fetchCount: 0 });
      e.binHead = bytes.toString('latin1', 0, bytes.length - COUNT_FROM_END);
      e.binTail = bytes.toString('latin1', bytes.length - COUNT_FROM_END + 4);
    }
    return e.binHead + u32Chars(count >>> 0) + e.binTail;
  }
  if (e.jsonHead === undefined) {
    const text = JSON.stringify(shareResponseJson({ ...e.facts, fetchCount: 0 }));
    // After the email: a quote inside a JSON string is always escaped, so this cannot match in it.
    const at = text.lastIndexOf(`${JSON_COUNT}0,`) + JSON_COUNT.length;
    // The UTF-8 bytes, one character each (the email may hold non-ASCII characters).
    e.jsonHead = Buffer.from(text.slice(0, at)).toString('latin1');
    e.jsonTail = Buffer.from(text.slice(at + 1)).toString('latin1');
  }
  return `${e.jsonHead}${count}${e.jsonTail}`;
}
