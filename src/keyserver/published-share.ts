/**
 * What a server says about a published share to anyone but its publisher: the
 * fingerprint its pages show, and why a fetch of it is refused. The share
 * service and the withdrawals (withdraw.ts) both say it, the same way.
 */
import sodium from 'sodium-native';
import { FINGERPRINT_BYTES, fingerprintInput, formatFingerprint } from '../vault/fingerprint-format.js';
import { KeyServerError } from './errors.js';

/**
 * The fingerprint of a published key (tag, X25519, Ed25519: 65 bytes), hashed
 * here with the server's libsodium and formatted by the vault's pure
 * formatter, so it is the one the publisher's `stash vault identity show` prints.
 */
export function publishedFingerprint(publicKey: Uint8Array): string {
  const hash = Buffer.alloc(32);
  sodium.crypto_generichash(hash, fingerprintInput(publicKey.subarray(1, 33), publicKey.subarray(33, 65)));
  return formatFingerprint(hash.subarray(0, FINGERPRINT_BYTES));
}

/** The error of a fetch of a share that is not live. */
export function fetchRefused(state: 'missing' | 'expired' | 'pending'): KeyServerError {
  switch (state) {
    case 'missing':
      return new KeyServerError(
        'SHARE_NOT_FOUND',
        'no share with this code is known here (it may have expired); ask the publisher for a new code',
      );
    case 'expired':
      // A look-up does not tell an expired share from an unpublished one: both are tombstones (withdraw.ts).
      return new KeyServerError(
        'SHARE_EXPIRED',
        'this share has expired or was unpublished; ask the publisher to publish again',
      );
    case 'pending':
      return new KeyServerError(
        'SHARE_PENDING',
        'this share is pending verification: the publisher has not confirmed the email link yet',
      );
  }
}
