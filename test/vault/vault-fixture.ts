/**
 * Shared setup for the vault suites: real vaults in fresh temp folders, with
 * the 'test' KDF preset (libsodium's minimum cost) so suites run in seconds.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as assert from 'uvu/assert';
import { initVault, unlockVault } from '../../src/vault/index.js';

export const PASSWORD = 'correct horse battery staple';

export interface TestVault {
  root: string;
  dir: string;
  key: Buffer;
  password: Buffer;
}

const roots: string[] = [];

/** A new temp folder (removed by cleanup()). */
export function tempRoot(): string {
  const root = mkdtempSync(join(tmpdir(), 'stash-vault-test-'));
  roots.push(root);
  return root;
}

/** A new, unlocked vault in a fresh temp folder. */
export async function newVault(password = PASSWORD): Promise<TestVault> {
  const root = tempRoot();
  const dir = join(root, 'vault');
  await initVault(dir, Buffer.from(password), { kdf: 'test' });
  const key = await unlockVault(dir, Buffer.from(password));
  return { root, dir, key, password: Buffer.from(password) };
}

export function cleanup(): void {
  for (const root of roots.splice(0)) rmSync(root, { recursive: true, force: true });
}

/** Every file under `dir` with its bytes and mtime, for "nothing changed" checks. */
export function snapshot(dir: string): Map<string, string> {
  const out = new Map<string, string>();
  const walk = (d: string) => {
    for (const name of readdirSync(d).sort()) {
      const p = join(d, name);
      const st = statSync(p);
      if (st.isDirectory()) {
        out.set(p, `dir ${(st.mode & 0o777).toString(8)}`);
        walk(p);
      } else {
        out.set(p, `${(st.mode & 0o777).toString(8)} ${st.mtimeMs} ${readFileSync(p).toString('hex')}`);
      }
    }
  };
  walk(dir);
  return out;
}

export function assertSameTree(before: Map<string, string>, after: Map<string, string>, what: string): void {
  assert.equal([...after.keys()], [...before.keys()], `${what}: the set of files changed`);
  for (const [k, v] of before) assert.ok(after.get(k) === v, `${what}: ${k} changed`);
}

/** Runs `fn`, expecting a thrown error with `code`; returns the error. */
export function expectCode(fn: () => unknown, code: string, what = code): Error & { code: string } {
  try {
    fn();
  } catch (err) {
    const e = err as Error & { code: string };
    assert.is(e.code, code, `${what}: expected ${code}, got ${e.code}: ${e.message}`);
    return e;
  }
  assert.unreachable(`${what}: expected ${code}, nothing was thrown`);
  throw new Error('unreachable');
}

/** The async form of expectCode. */
export async function expectCodeAsync(
  fn: () => Promise<unknown>,
  code: string,
  what = code,
): Promise<Error & { code: string }> {
  try {
    await fn();
  } catch (err) {
    const e = err as Error & { code: string };
    assert.is(e.code, code, `${what}: expected ${code}, got ${e.code}: ${e.message}`);
    return e;
  }
  assert.unreachable(`${what}: expected ${code}, nothing was thrown`);
  throw new Error('unreachable');
}
