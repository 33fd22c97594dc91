/**
 * Several people, each with a vault of their own, running the real
 * `bin/stash.js`: commands as one of them (only their own password at hand),
 * the checks of a success and of a refusal, and the exchange of identities
 * through a loopback key server (test/cli/teams.test.ts, rotation.test.ts).
 */
import * as assert from 'uvu/assert';
import { addContact, createContainer, identityPublic, initVault, unlockVault, wipe } from '../../src/vault/index.js';
import { shareContainer } from '../../src/vault/sharing/index.js';
import type { TestServer } from '../keyserver/harness.js';
import type { CliEnv, RunResult } from './harness.js';
import { confirmLink } from './keyserver-harness.js';

/** Runs stash as `t`, with only `t`'s own password available. */
export const as = (t: CliEnv, args: string[], input?: string): Promise<RunResult> =>
  t.run(args, { env: { STASH_PASSWORD_FILE: t.pwFile }, ...(input === undefined ? {} : { input }) });

/** Runs stash as `t` and asserts exit status 0. */
export async function ok(t: CliEnv, args: string[], input?: string): Promise<RunResult> {
  const r = await as(t, args, input);
  assert.is(r.code, 0, `${args.join(' ')}: ${r.stderr}`);
  return r;
}

/** A refusal: the exit status, one `stash: ` line, no stack trace, nothing on stdout. */
export async function refused(
  t: CliEnv,
  args: string[],
  status: number,
  message: RegExp,
  input?: string,
): Promise<void> {
  const r = await as(t, args, input);
  assert.is(r.code, status, `${args.join(' ')}: expected ${status}, got ${r.code}: ${r.stderr}`);
  assert.match(r.stderr, /^stash: [^\n]+\n$/, `one line: ${r.stderr}`);
  assert.not.match(r.stderr, /\n\s+at /, 'no stack trace');
  assert.match(r.stderr, message);
  assert.is(r.stdout, '');
}

export const fingerprintOf = async (t: CliEnv): Promise<string> =>
  (JSON.parse((await ok(t, ['vault', 'identity', 'show', '--json'])).stdout) as { fingerprint: string }).fingerprint;

/** `from` publishes on `server`, `to` receives it as contact `name` with the fingerprint read out to them. */
export async function exchange(
  server: TestServer,
  from: CliEnv,
  email: string,
  to: CliEnv,
  name: string,
): Promise<void> {
  const pub = await ok(from, ['vault', 'identity', 'publish', '--email', email, '--server', server.url, '--json']);
  const code = String((JSON.parse(pub.stdout) as { code: string }).code);
  await confirmLink(server, email);
  const r = await ok(to, [
    'vault',
    'contact',
    'receive',
    code,
    '--server',
    server.url,
    '--fingerprint',
    await fingerprintOf(from),
    '--name',
    name,
  ]);
  assert.match(r.stdout, new RegExp(`Added contact ${name} <${email}>`));
}

/**
 * New vaults for `owner` and `member` (the test KDF), `member` a contact of `owner` named
 * after the part of `email` before the @, and `owner`'s new container `name` shared with
 * them, all through the library. Returns `owner`'s vault key (wipe it).
 */
export async function sharedPair(
  owner: CliEnv,
  member: CliEnv,
  name: string,
  email = 'bob@example.test',
): Promise<Buffer> {
  for (const x of [owner, member]) await initVault(x.vault, Buffer.from(x.password), { kdf: 'test' });
  const key = await unlockVault(owner.vault, Buffer.from(owner.password));
  const memberKey = await unlockVault(member.vault, Buffer.from(member.password));
  const { x25519, ed25519 } = identityPublic(member.vault, memberKey);
  wipe(memberKey);
  addContact(owner.vault, key, { name: email.slice(0, email.indexOf('@')), email, x25519, ed25519 });
  createContainer(owner.vault, key, name);
  shareContainer(owner.vault, key, name, [{ x25519, ed25519 }]);
  return key;
}
