/** Limits of the agent cache, shared by the cache, the security check and doctor. */
export { DEFAULT_TTL_SECONDS, MAX_KEY_BYTES, MAX_TTL_SECONDS } from '../protocol/limits.js';

/** Most entries the cache holds; a put beyond this is refused (CACHE_FULL). */
export const MAX_ENTRIES = 1024;
/** Most connections served at once; more are closed at accept. */
export const MAX_CONNECTIONS = 128;
/**
 * Locked memory the full cache needs: sodium_malloc locks at least one page
 * per allocation, plus two pages of channel keys for each connection.
 */
export const PAGE_BYTES = 4096;
export const LOCKED_BYTES_NEEDED = (MAX_ENTRIES + 2 * MAX_CONNECTIONS) * PAGE_BYTES;

/**
 * A frame must be complete within this long of its first byte; a connection
 * that keeps a frame open longer (trickling a byte now and then to hold a
 * connection slot) is answered FRAME_TIMEOUT and closed. A real client writes
 * each frame in one go, so it arrives within milliseconds.
 */
export const FRAME_DEADLINE_MS = 5000;
/**
 * Unsent replies a connection may have queued in the agent; past this the
 * agent stops reading that connection's requests until the client reads.
 */
export const OUTPUT_BOUND_BYTES = 64 * 1024;
/** A connection whose unsent replies stay past the bound this long is dropped. */
export const OUTPUT_STALL_MS = 10_000;
/**
 * A frame may arrive in at most this many small reads (under
 * SMALL_PIECE_BYTES) before it is complete. A real client writes each frame in
 * one go, which the agent reads in one to a few pieces of up to 64 KiB. A
 * client that sends a byte at a time costs the agent a wake-up, a system call
 * and an event per byte: about 0.1 ms of CPU each here, so a 128 KiB frame
 * sent that way would cost it seconds against about 1 ms sent whole.
 */
export const MAX_SMALL_PIECES = 32;
export const SMALL_PIECE_BYTES = 1024;
/**
 * HELLO frames one connection may send. A client sends one (two when a
 * HELLO with a flag is refused with UNKNOWN_FLAGS and it tries again without);
 * each costs the agent a key pair and a key exchange. The next one is answered
 * HANDSHAKE_LIMIT and the connection closed.
 */
export const MAX_HELLOS = 8;
