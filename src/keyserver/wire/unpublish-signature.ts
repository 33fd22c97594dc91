/**
 * What a publisher signs to delete a share (docs/http-api.md, "Unpublish"):
 *
 *   "stash-unpublish-v1" 0x0A | u8 length | canonical share code | u64 timestamp (ms) | 16-byte nonce
 *
 * signed with Ed25519 by the identity whose public key the share holds. The
 * domain string names the action, so no other stash signature (a shared
 * container's membership or write signature) can pass for one. The code is
 * the canonical form (upper case, no hyphens), so any spelling the user
 * typed signs the same bytes. Pure: no I/O, no sodium (the CLI signs with the
 * vault's libsodium, the server verifies with its own).
 */
import { Writer } from './codec.js';
import { UNPUBLISH_NONCE_BYTES } from './messages.js';

const DOMAIN = Buffer.from('stash-unpublish-v1\n', 'latin1');

/** How far the signed timestamp may be from the server's clock. */
export const UNPUBLISH_WINDOW_MS = 5 * 60_000;

/** The bytes an unpublish signature covers. */
export function unpublishSignedBytes(canonicalCode: string, timestamp: number, nonce: Uint8Array): Buffer {
  if (nonce.length !== UNPUBLISH_NONCE_BYTES) throw new RangeError(`the nonce must be ${UNPUBLISH_NONCE_BYTES} bytes`);
  const body = new Writer().text(canonicalCode, 1).u64(timestamp).bytes(nonce).finish();
  return Buffer.concat([DOMAIN, body]);
}
