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
