/** Field limits of the SBX2 payloads (docs/protocol.md). */

/** Container ids are 1..64 bytes (stash uses 16 random bytes). */
export const MAX_ID_BYTES = 64;
/** Content keys are 1..1024 bytes (stash uses 32). */
export const MAX_KEY_BYTES = 1024;
/** Diagnostic path strings, UTF-8 bytes. */
export const MAX_PATH_BYTES = 4096;
/** Default TTL when a put omits it: 15 minutes (spec). */
export const DEFAULT_TTL_SECONDS = 900;
/** Largest TTL accepted: 30 days. */
export const MAX_TTL_SECONDS = 30 * 24 * 3600;
/** Activity tokens: 128 random bits. */
export const TOKEN_BYTES = 16;
/** Protocol version carried in HELLO (the magic's digit). */
export const PROTOCOL_VERSION = 2;

/** SecretActivityKind values (spec). */
export const ACTIVITY_KINDS = ['unlock', 'open', 'env', 'form', 'recovery', 'vault'] as const;
export type ActivityKindName = (typeof ACTIVITY_KINDS)[number];
