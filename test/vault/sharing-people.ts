/**
 * People for the sharing suites: real vaults with identities (Alice the owner,
 * Bob and Carol), contacts between them, and read/write helpers that go
 * through the same library calls as the CLI (open the stanza, verify, read or
 * write a signed revision).
 */
import * as assert from 'uvu/assert';
import { copyFileSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  addContact,
  createContainer,
  identityPublic,
  identitySecret,
  unwrapContentKey,
  wipe,
  wipeEntries,
  writeEntry,
  type IdentitySecret,
} from '../../src/vault/index.js';
import {
  exportShared,
  linkShared,
  openSharedContentKey,
  readSharedEntries,
  shareContainer,
  updateSharedEntries,
} from '../../src/vault/sharing/index.js';
import { newVault, tempRoot, type TestVault } from './vault-fixture.js';

export interface Person extends TestVault {
  pub: { x25519: Buffer; ed25519: Buffer };
  secret: IdentitySecret;
}

/** A new vault and its identity, secret keys open. */
export async function person(): Promise<Person> {
  const v = await newVault();
  const p = identityPublic(v.dir, v.key);
  return { ...v, pub: { x25519: p.x25519, ed25519: p.ed25519 }, secret: identitySecret(v.dir, v.key) };
}

/** `a` adds `b` to its contacts as `name`. */
export function befriend(a: Person, b: Person, name: string): void {
  addContact(a.dir, a.key, { name, email: `${name}@example.test`, ...b.pub });
}

/** Every entry of shared container `name` as text, read as `p`. */
export function read(p: Person, name: string): Map<string, string> {
  const key = openSharedContentKey(p.dir, name, p.secret);
  try {
    const e = readSharedEntries(p.dir, name, key);
    const out = new Map([...e].map(([k, v]) => [k, v.toString()]));
    wipeEntries(e);
    return out;
  } finally {
    wipe(key);
  }
}

/** Sets one entry of shared container `name` as `p` (a new signed revision). */
export function write(p: Person, name: string, entry: string, value: string): void {
  const key = openSharedContentKey(p.dir, name, p.secret);
  try {
    updateSharedEntries(p.dir, name, key, new Map([[entry, Buffer.from(value)]]), p.secret);
  } finally {
    wipe(key);
  }
}

/**
 * Two versions of shared file `file` written from the same base (a git
 * conflict): `ours` runs first and its version is left in `file`; `theirs`
 * runs on the base again, and its version is returned in a copy elsewhere.
 */
export function diverge(file: string, ours: () => void, theirs: () => void): string {
  const base = readFileSync(file);
  ours();
  const oursBytes = readFileSync(file);
  writeFileSync(file, base);
  theirs();
  const copy = join(tempRoot(), 'theirs.stash');
  copyFileSync(file, copy);
  writeFileSync(file, oursBytes);
  return copy;
}

/** Alice owns `team` (A=alpha), shared with Bob and Carol, exported to a folder and linked there by all three. */
export async function threeMembers(): Promise<{ alice: Person; bob: Person; carol: Person; file: string }> {
  const [alice, bob, carol] = [await person(), await person(), await person()];
  for (const [a, b, n] of [
    [alice, bob, 'bob'],
    [alice, carol, 'carol'],
    [bob, alice, 'alice'],
    [carol, alice, 'alice'],
  ] as const)
    befriend(a, b, n);
  createContainer(alice.dir, alice.key, 'team');
  const ck = unwrapContentKey(alice.dir, alice.key, 'team');
  writeEntry(alice.dir, 'team', ck, 'A', Buffer.from('alpha'));
  wipe(ck);
  shareContainer(alice.dir, alice.key, 'team', [bob.pub, carol.pub]);
  const file = join(tempRoot(), 'team.stash');
  exportShared(alice.dir, 'team', file);
  assert.is(linkShared(alice.dir, alice.key, file, 'team').outcome, 'replaced-copy');
  linkShared(bob.dir, bob.key, file, 'team');
  linkShared(carol.dir, carol.key, file, 'team');
  return { alice, bob, carol, file };
}
