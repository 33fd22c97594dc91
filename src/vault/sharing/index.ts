/**
 * Shared containers: one file, several recipients, every write signed. See
 * docs/container-format.md ("Shared containers") for the bytes and the
 * threat model, docs/vault.md ("Sharing") for the design.
 *
 * Loaded lazily by the CLI: a private container never imports this module.
 */
export {
  shareContainer,
  unshareContainer,
  containerMembers,
  type MembershipChange,
  type MembersReport,
  type MemberInfo,
} from './membership.js';
export { openSharedContentKey, readSharedEntries, updateSharedEntries } from './shared-entries.js';
export { importShared, linkShared, exportShared, acceptShared, type TransferResult } from './transfer.js';
export type { PublicIdentity } from './verify.js';
export { SHARED_VERSION, MAX_RECIPIENTS } from './format.js';
export { mergeShared, type MergeResult, type Prefer } from './merge.js';
export { mergeSharedFiles, sharedContainerOfFile } from './merge-files.js';
export { describeConflicts, type EntryConflict } from './merge-rule.js';
export { NumberingError, MAX_REVISION, MAX_JUMP } from './numbering.js';
