/**
 * Identity rotation (docs/vault.md, "Identity rotation"): the statement
 * codec, rotating this vault's identity, and accepting a contact's statement.
 * Loaded lazily by the CLI.
 */
export {
  decodeStatement,
  makeStatement,
  parseStatement,
  statementHash,
  statementText,
  STATEMENT_BYTES,
  TEXT_PREFIX,
  type RotationStatement,
} from './statement.js';
export { rotateIdentity, type RotationResult } from './rotate.js';
export { acceptRotation, type AcceptResult } from './accept.js';
export { ownStatement } from './own-statement.js';
