/**
 * Protocol error codes: the numeric code travels in ERROR replies, the name is
 * the StashError `code` on both sides. Numbers are stable; never reuse one.
 */
import { StashError } from '../errors.js';

export const ProtocolErrorCode = {
  BAD_MAGIC: 1,
  MALFORMED_FRAME: 2,
  INVALID_SIZE: 3,
  UNSUPPORTED_TYPE: 4,
  MALFORMED_PAYLOAD: 5,
  NON_POSITIVE_TTL: 6,
  UNKNOWN_KIND: 7,
  BAD_TOKEN: 8,
  ACTIVITY_REFUSED: 9,
  CACHE_FULL: 10,
  NO_SESSION: 11,
  DECRYPT_FAILED: 12,
  OUT_OF_ORDER: 13,
  VERSION_MISMATCH: 14,
  FORBIDDEN: 15,
  ACTIVITY_LIMIT: 16,
  NO_PROCESS: 17,
  INTERNAL: 18,
  SUSPENDING: 19,
  UNKNOWN_FLAGS: 20,
  SLOW_FRAME: 21,
  HANDSHAKE_LIMIT: 22,
  SESSION_LOCKED: 23,
} as const;

export type ProtocolErrorName = keyof typeof ProtocolErrorCode;

const byNumber = new Map<number, ProtocolErrorName>(
  Object.entries(ProtocolErrorCode).map(([name, n]) => [n, name as ProtocolErrorName]),
);

/** The name of a numeric code, or undefined for a code this version does not know. */
export function protocolErrorName(code: number): ProtocolErrorName | undefined {
  return byNumber.get(code);
}

/**
 * A protocol failure. `fatal` means the byte stream can no longer be trusted
 * and the connection must be closed after the error reply is sent.
 */
export class ProtocolError extends StashError {
  readonly protocolCode: number;
  readonly fatal: boolean;

  constructor(name: ProtocolErrorName, message: string, fatal = false) {
    super(`AGENT_${name}`, message);
    this.protocolCode = ProtocolErrorCode[name];
    this.fatal = fatal;
  }
}
