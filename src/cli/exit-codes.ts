/**
 * Exit statuses of `stash`, one table, documented in docs/cli.md.
 * Based on sysexits(3) where one fits.
 */
export const ExitCode = {
  ok: 0,
  /** A check failed (doctor), or any error without a more specific status. */
  failure: 1,
  usage: 64,
  dataError: 65,
  noInput: 66,
  unavailable: 69,
  software: 70,
  cantCreate: 73,
  ioError: 74,
  tempFail: 75,
  /** The key server answered something the client cannot use. */
  protocol: 76,
  noPermission: 77,
  config: 78,
  /** Shared containers: a file refused, one status per reason (docs/container-format.md). */
  shareBadSignature: 80,
  shareMembershipInvalid: 81,
  shareSignerNotMember: 82,
  shareRollback: 83,
  shareDiverged: 84,
  shareNotRecipient: 85,
  shareUntrustedOwner: 86,
  /** Cancelled at a prompt (Ctrl-C, Ctrl-D). */
  interrupted: 130,
} as const;

const byErrorCode: Record<string, number> = {
  USAGE: ExitCode.usage,
  INVALID_NAME: ExitCode.usage,
  INVALID_ARGUMENT: ExitCode.usage,
  INVALID_PASSWORD: ExitCode.usage,
  PASSWORD_MISMATCH: ExitCode.usage,
  WEAK_PASSWORD: ExitCode.usage,
  NO_PASSWORD_SOURCE: ExitCode.usage,
  CONFIG: ExitCode.config,
  NATIVE_UNAVAILABLE: ExitCode.software,
  AGENT_UNAVAILABLE: ExitCode.unavailable,
  AGENT_VERSION: ExitCode.unavailable,
  AGENT_PROTOCOL: ExitCode.software,
  AGENT_UNSAFE_DIR: ExitCode.noPermission,
  KEYRING_UNAVAILABLE: ExitCode.unavailable,
  WRONG_PASSWORD: ExitCode.noPermission,
  PERMISSION: ExitCode.noPermission,
  VAULT_KEY_MISMATCH: ExitCode.noPermission,
  VAULT_CORRUPT: ExitCode.dataError,
  CONTAINER_CORRUPT: ExitCode.dataError,
  CONTENT_KEY_MISMATCH: ExitCode.dataError,
  INPUT_TOO_LARGE: ExitCode.dataError,
  CONTAINER_FULL: ExitCode.dataError,
  NOT_FOUND: ExitCode.noInput,
  VAULT_NOT_FOUND: ExitCode.noInput,
  CONTAINER_NOT_FOUND: ExitCode.noInput,
  ENTRY_NOT_FOUND: ExitCode.noInput,
  CONTACT_NOT_FOUND: ExitCode.noInput,
  FILE_NOT_FOUND: ExitCode.noInput,
  VAULT_EXISTS: ExitCode.cantCreate,
  CONTAINER_EXISTS: ExitCode.cantCreate,
  VAULT_LOCKED: ExitCode.tempFail,
  VAULT_IO: ExitCode.ioError,
  COMMAND_NOT_FOUND: 127,
  COMMAND_NOT_EXECUTABLE: 126,
  INTERRUPTED: ExitCode.interrupted,
  // key server client (identity publish, contact receive)
  NO_KEY_SERVER: ExitCode.usage,
  CODE_TYPO: ExitCode.usage,
  INVALID_EMAIL: ExitCode.usage,
  BAD_FINGERPRINT: ExitCode.usage,
  INVALID_CONTACT: ExitCode.usage,
  FINGERPRINT_MISMATCH: ExitCode.dataError,
  BAD_PUBLIC_KEY: ExitCode.dataError,
  INVALID_PUBLIC_KEY: ExitCode.dataError,
  SHARE_NOT_FOUND: ExitCode.noInput,
  SHARE_EXPIRED: ExitCode.noInput,
  SHARE_PENDING: ExitCode.tempFail,
  RATE_LIMITED: ExitCode.tempFail,
  STORE_UNAVAILABLE: ExitCode.tempFail,
  SERVER_UNREACHABLE: ExitCode.unavailable,
  VERIFICATION_NOT_SENT: ExitCode.unavailable,
  SERVER_UNTRUSTED: ExitCode.noPermission,
  SERVER_PROTOCOL: ExitCode.protocol,
  CONTACT_EXISTS: ExitCode.cantCreate,
  // shared containers
  SHARE_BAD_SIGNATURE: ExitCode.shareBadSignature,
  SHARE_MEMBERSHIP_INVALID: ExitCode.shareMembershipInvalid,
  SHARE_SIGNER_NOT_MEMBER: ExitCode.shareSignerNotMember,
  SHARE_ROLLBACK: ExitCode.shareRollback,
  SHARE_DIVERGED: ExitCode.shareDiverged,
  SHARE_NOT_RECIPIENT: ExitCode.shareNotRecipient,
  SHARE_UNTRUSTED_OWNER: ExitCode.shareUntrustedOwner,
  SHARE_NOT_OWNER: ExitCode.noPermission,
  SHARE_NOT_MEMBER: ExitCode.noInput,
  SHARE_CHANGED: ExitCode.tempFail,
};

/** The exit status for an error code; 1 for anything not in the table. */
export function exitCodeFor(code: string | undefined): number {
  return (code !== undefined && byErrorCode[code]) || ExitCode.failure;
}
