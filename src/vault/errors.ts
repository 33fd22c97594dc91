/**
 * The error class of the vault library. Every failure carries a stable string
 * `code`; the CLI maps codes to exit statuses in one place (WRONG_PASSWORD -> 77,
 * *_CORRUPT -> 65). Messages name the file involved and never contain key bytes,
 * passwords or secret values.
 */
import { StashError } from '../errors.js';

export type VaultErrorCode =
  | 'VAULT_NOT_FOUND'
  | 'VAULT_EXISTS'
  | 'VAULT_CORRUPT'
  | 'VAULT_LOCKED'
  | 'VAULT_KEY_MISMATCH'
  | 'VAULT_IO'
  | 'PERMISSION'
  | 'WRONG_PASSWORD'
  | 'INVALID_PASSWORD'
  | 'INVALID_ARGUMENT'
  | 'INVALID_NAME'
  | 'CONTAINER_NOT_FOUND'
  | 'CONTAINER_EXISTS'
  | 'CONTAINER_CORRUPT'
  | 'CONTAINER_FULL'
  | 'CONTENT_KEY_MISMATCH'
  | 'ENTRY_NOT_FOUND'
  | 'CONTACT_EXISTS'
  | 'CONTACT_NOT_FOUND'
  | 'INVALID_CONTACT'
  | 'BAD_FINGERPRINT'
  | 'BAD_PUBLIC_KEY'
  // shared containers (src/vault/sharing/, docs/container-format.md)
  | 'SHARE_BAD_SIGNATURE'
  | 'SHARE_MEMBERSHIP_INVALID'
  | 'SHARE_SIGNER_NOT_MEMBER'
  | 'SHARE_ROLLBACK'
  | 'SHARE_DIVERGED'
  | 'SHARE_NOT_RECIPIENT'
  | 'SHARE_UNTRUSTED_OWNER'
  | 'SHARE_NOT_OWNER'
  | 'SHARE_NOT_SHARED'
  | 'SHARE_NOT_MEMBER'
  | 'SHARE_CHANGED'
  | 'FILE_NOT_FOUND'
  // a path the user named for output (user-file.ts)
  | 'FILE_EXISTS'
  | 'OUTPUT_NOT_FILE'
  // recovery key (recovery-key.ts)
  | 'INVALID_RECOVERY_KEY'
  | 'WRONG_RECOVERY_KEY'
  | 'NO_RECOVERY_KEY'
  // identity rotation (rotation/)
  | 'BAD_ROTATION'
  | 'ROTATION_UNKNOWN_KEY'
  | 'ROTATION_CONFLICT'
  | 'KEY_RETIRED';

export class VaultError extends StashError {
  declare readonly code: VaultErrorCode;
  /**
   * For a name that was not found: the word asked for and the names that do
   * exist, so the CLI can say "did you mean ...?". Names only, never values.
   */
  misspelt?: { word: string; candidates: string[] };

  constructor(code: VaultErrorCode, message: string, options?: { cause?: unknown }) {
    // Vault errors describe local files; they are never sent to a remote caller.
    super(code, message, { ...(options?.cause === undefined ? {} : { cause: options.cause }), expose: false });
  }
}

/** The errno name of a Node system error, if any. */
export function errnoCode(err: unknown): string | undefined {
  if (typeof err === 'object' && err !== null && 'code' in err) {
    const code = (err as { code: unknown }).code;
    if (typeof code === 'string') return code;
  }
  return undefined;
}

/**
 * Turns a failed file-system call into a VaultError with a plain message:
 * EACCES/EPERM become PERMISSION, anything else VAULT_IO. `action` reads like
 * "read", "write", "create folder".
 */
export function ioError(err: unknown, action: string, path: string): VaultError {
  const errno = errnoCode(err) ?? 'EIO';
  if (errno === 'EACCES' || errno === 'EPERM') {
    return new VaultError('PERMISSION', `cannot ${action} ${path}: permission denied`, { cause: err });
  }
  const detail = err instanceof Error ? err.message : String(err);
  return new VaultError('VAULT_IO', `cannot ${action} ${path}: ${detail}`, { cause: err });
}
