/**
 * The vault library: one folder holding a password-wrapped vault key, the
 * owner's identity, contacts and encrypted containers. See docs/vault.md for
 * the design and docs/container-format.md for the byte layouts.
 *
 * Keys returned by this module are sodium secure buffers; release them with
 * wipe(), and decrypted entries with wipeEntries(). Passwords passed in are
 * read, never modified; zeroing them is the caller's job.
 */
export { VaultError, type VaultErrorCode } from './errors.js';
export {
  defaultVaultDir,
  vaultExists,
  vaultPaths,
  VAULT_FILE,
  IDENTITY_FILE,
  CONTACTS_FILE,
  CONTAINERS_DIR,
  CONTAINER_EXT,
} from './paths.js';
export {
  initVault,
  createVault,
  readVaultInfo,
  unlockVault,
  changePassword,
  verifyVaultKey,
  type VaultInfo,
  type KdfOptions,
} from './vault.js';
export { kdfPreset, DEFAULT_KDF, type KdfPreset, type KdfParams } from './kdf.js';
export { identityPublic, identitySecret, type IdentityPublic, type IdentitySecret } from './identity.js';
export {
  fingerprintOf,
  formatFingerprint,
  parseFingerprint,
  fingerprintsEqual,
  FINGERPRINT_BYTES,
  FINGERPRINT_CHARS,
  type FingerprintLike,
} from './fingerprint.js';
export { encodePublicKey, decodePublicKey, PUBLIC_KEY_BYTES, PUBLIC_KEY_TAG, type PublicKeys } from './public-key.js';
export {
  createContainer,
  listContainers,
  removeContainer,
  containerInfo,
  unwrapContentKey,
  readEntries,
  readEntry,
  writeEntry,
  deleteEntry,
  updateEntries,
  wipeEntries,
  changeTime,
  type ContainerInfo,
  type ContainerListing,
  type Entries,
} from './containers.js';
export { addContact, listContacts, getContact, removeContact, type Contact, type NewContact } from './contacts.js';
export {
  validateContainerName,
  parseContainerName,
  type ContainerName,
  type ContainerRef,
  CONTAINER_NAME_RE,
  FLAT_NAME_RE,
  MAX_VALUE_BYTES,
  MAX_BODY_BYTES,
  MAX_ENTRIES,
  byCodeUnits,
} from './names.js';
export { validateEntryPath } from './entry-path.js';
export { wipe, secureCopy, secureAlloc, KEY_BYTES } from './secure.js';
