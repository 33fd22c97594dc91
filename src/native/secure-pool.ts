/**
 * Reusable secure memory for whatever a process needs per request or per
 * connection (the agent's handshakes, sealed-frame plaintexts and cached keys,
 * the key server's verification tokens): sodium_malloc buffers in a few sizes,
 * zeroed when given back and handed out again, never freed while the process
 * runs.
 *
 * Why not sodium_malloc and sodium_free each time: in sodium-native 5.1.0
 * sodium_free does not free. It detaches the buffer, and libsodium's free (the
 * munmap of the guarded mapping) waits for the garbage collector to finalise
 * the ArrayBuffer; sodium_malloc's result is not checked either. A process
 * that allocates faster than V8 collects piles up mappings, about four per
 * allocation, until mmap fails at the kernel's map limit (vm.max_map_count,
 * 65,530 on Linux) and the addon aborts the process on a
 * napi_create_external_arraybuffer assertion: 20,000 HELLOs pipelined into the
 * agent did that in 1.5 s (issue 24), and so does a `node -e` loop of 20,000
 * sodium_malloc(32)/sodium_free. A buffer given back here is reused instead,
 * so a process holds at most as many as its callers ever held at once, and
 * the agent bounds those (connections, cache entries, handshakes).
 *
 * - take(size) returns a zero-filled view of exactly `size` bytes at the end
 *   of a buffer of the smallest size class that holds it (at the end, where
 *   sodium_malloc puts memory, so an overrun meets the guard page). Each
 *   buffer is a whole sodium_malloc allocation: guard pages, mlock'ed, out of
 *   core dumps; sodium_mprotect_* on a view protects that buffer alone.
 * - release(view) zeroes the whole buffer and parks it; parked buffers are
 *   handed out oldest first. The view is not detached (sodium_free would
 *   detach the buffer for good): it reads zeros until the buffer is handed out
 *   again, then another owner's bytes. Never use a view after giving it back.
 * - A view dropped without release() is zeroed and parked when it is garbage
 *   collected. Keep the view take() returned until release(): a subarray of it
 *   does not keep the buffer from being reclaimed.
 * - More than `maxBuffers` buffers at once is refused (SECURE_MEMORY_EXHAUSTED)
 *   long before the map limit: an error the caller can answer, not an abort.
 *
 * docs/protocol.md, "Memory".
 */
import { StashError } from '../errors.js';
import { loadSodium } from './sodium.js';

// Loaded on first use: the vault's wipe() imports this module, and importing
// the vault must not load the native library (`stash --help`).
const sodium = (): ReturnType<typeof loadSodium> => loadSodium();

/**
 * Buffer sizes, smallest first: session and ephemeral keys (64), a cached key
 * (up to 1 KiB), a channel scratch (4 KiB), and sealed-frame plaintexts up to
 * the 128 KiB frame cap.
 */
export const SIZE_CLASSES = [64, 1024, 4096, 16 * 1024, 64 * 1024, 128 * 1024] as const;

/**
 * Buffers one process may hold at once. The agent needs at most about 1,700
 * (1,024 cache entries and 5 per connection for 128 connections); each costs
 * about four of the kernel's 65,530 mappings.
 */
export const DEFAULT_MAX_BUFFERS = 4096;

interface Block {
  /** A whole sodium_malloc allocation of SIZE_CLASSES[cls] bytes. */
  mem: Buffer;
  cls: number;
}

/** What the pool holds, for tests and diagnostics. */
export interface PoolStats {
  /** sodium_malloc allocations made, ever (none is freed). */
  buffers: number;
  /** Buffers handed out and not yet given back (nor collected). */
  inUse: number;
  /** True when every parked buffer is all zero. */
  parkedZero: boolean;
}

export class SecurePool {
  /** Parked buffers per size class, oldest first. */
  private readonly parked: Block[][] = SIZE_CLASSES.map(() => []);
  private readonly views = new WeakMap<Buffer, Block>();
  private readonly registry = new FinalizationRegistry<Block>((block) => this.park(block));
  private allocated = 0;

  constructor(readonly maxBuffers = DEFAULT_MAX_BUFFERS) {}

  /** A zero-filled view of `size` bytes of secure memory; give it back with release(). */
  take(size: number): Buffer {
    const cls = SIZE_CLASSES.findIndex((c) => size <= c);
    if (!Number.isInteger(size) || size < 0 || cls < 0) {
      throw new RangeError(`secure pool: cannot take ${size} bytes (at most ${SIZE_CLASSES[SIZE_CLASSES.length - 1]})`);
    }
    const block = this.parked[cls]!.shift() ?? this.allocate(cls);
    const view = block.mem.subarray(block.mem.length - size);
    this.views.set(view, block);
    this.registry.register(view, block, block);
    return view;
  }

  /** Zeroes a view from take() and parks its buffer; false (nothing done) for any other buffer, or one given back already. */
  release(view: Uint8Array): boolean {
    const block = this.views.get(view as Buffer);
    if (block === undefined) return false;
    this.views.delete(view as Buffer);
    this.registry.unregister(block);
    this.park(block);
    return true;
  }

  stats(): PoolStats {
    let parked = 0;
    let parkedZero = true;
    for (const list of this.parked) {
      for (const { mem } of list) {
        parked++;
        if (!sodium().sodium_is_zero(mem)) parkedZero = false;
      }
    }
    return { buffers: this.allocated, inUse: this.allocated - parked, parkedZero };
  }

  private allocate(cls: number): Block {
    if (this.allocated >= this.maxBuffers) {
      throw new StashError(
        'SECURE_MEMORY_EXHAUSTED',
        `secure memory: ${this.allocated} buffers are in use, the most this process may hold`,
      );
    }
    const mem = sodium().sodium_malloc(SIZE_CLASSES[cls]!);
    sodium().sodium_memzero(mem); // sodium_malloc fills new memory with 0xdb
    this.allocated++;
    return { mem, cls };
  }

  private park(block: Block): void {
    // A holder may have left it PROT_NONE (the agent's cache does while a key is stored).
    sodium().sodium_mprotect_readwrite(block.mem);
    sodium().sodium_memzero(block.mem);
    this.parked[block.cls]!.push(block);
  }
}

/** The pool of this process. */
export const securePool = new SecurePool();
