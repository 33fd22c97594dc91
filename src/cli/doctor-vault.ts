/**
 * `stash doctor`'s vault checks: where the vault is and why there, whether its
 * files are present, private (0700 folders, 0600 files) and readable, and
 * whether every container header is sound. Needs no password.
 */
import { lstatSync, readdirSync, type Stats } from 'node:fs';
import { join } from 'node:path';
import { errorMessage } from '../errors.js';
import {
  CONTAINER_EXT,
  defaultVaultDir,
  identityPublic,
  kdfPreset,
  listContainers,
  readVaultInfo,
  vaultExists,
  vaultPaths,
} from '../vault/index.js';
import type { DoctorCheck } from './doctor-checks.js';
import { formatBytes, octal } from './output.js';

const section = 'vault' as const;

function stat(path: string): Stats | null {
  try {
    return lstatSync(path);
  } catch {
    return null;
  }
}

/** Files and folders whose mode lets group or others in. */
function openModes(dir: string): string[] {
  const p = vaultPaths(dir);
  const found: string[] = [];
  const check = (path: string, want: number): void => {
    const st = stat(path);
    if (st && (st.mode & 0o077) !== 0) found.push(`${path} is ${octal(st.mode)} (want ${octal(want)})`);
  };
  check(dir, 0o700);
  check(p.meta, 0o600);
  check(p.identity, 0o600);
  check(p.contacts, 0o600);
  check(p.containers, 0o700);
  let names: string[] = [];
  try {
    names = readdirSync(p.containers).filter((n) => n.endsWith(CONTAINER_EXT));
  } catch {
    /* reported as missing */
  }
  for (const n of names) check(join(p.containers, n), 0o600);
  // Records of shared containers (src/vault/sharing/records.ts): not secret, but a vault's own files all stay private.
  const shared = join(dir, 'shared');
  if (stat(shared)) {
    check(shared, 0o700);
    try {
      for (const n of readdirSync(shared).filter((x) => x.endsWith('.json'))) check(join(shared, n), 0o600);
    } catch {
      /* unreadable: the mode check above reports the folder */
    }
  }
  return found;
}

/**
 * Why the vault's Argon2id cost is too low to keep secrets behind, or null.
 * Anything below libsodium's "interactive" preset is weak; the minimum is
 * the cost STASH_KDF=test gives test suites, never meant for a real vault.
 */
function weakKdf(kdf: { opslimit: number; memlimit: number }): string | null {
  const test = kdfPreset('test');
  const interactive = kdfPreset('interactive');
  if (kdf.opslimit <= test.opslimit && kdf.memlimit <= test.memlimit) {
    return 'this is the minimum cost made for test suites (STASH_KDF=test): a stolen vault.json can be guessed at quickly';
  }
  if (kdf.opslimit < interactive.opslimit || kdf.memlimit < interactive.memlimit) {
    return `this is below the interactive preset (${interactive.opslimit} passes / ${formatBytes(interactive.memlimit)}): a stolen vault.json can be guessed at quickly`;
  }
  return null;
}

export function vaultChecks(env: NodeJS.ProcessEnv = process.env): {
  checks: DoctorCheck[];
  vault: Record<string, unknown>;
} {
  const dir = defaultVaultDir(env);
  const from = env.STASH_VAULT_DIR ? 'STASH_VAULT_DIR' : 'default location';
  const vault: Record<string, unknown> = { dir, source: from, exists: false };
  const checks: DoctorCheck[] = [];
  if (!vaultExists(dir)) {
    checks.push({
      section,
      name: 'vault',
      status: 'warn',
      detail: `no vault at ${dir} (${from})`,
      fix: 'create one: stash vault init',
    });
    return { checks, vault };
  }
  vault.exists = true;
  try {
    const info = readVaultInfo(dir);
    vault.info = info;
    const detail = `${dir} (${from}); format ${info.formatVersion}, Argon2id ${info.kdf.opslimit} pass(es) / ${formatBytes(info.kdf.memlimit)}, created ${info.createdAt}`;
    const weak = weakKdf(info.kdf);
    checks.push(
      weak === null
        ? { section, name: 'vault', status: 'ok', detail }
        : {
            section,
            name: 'vault',
            status: 'warn',
            detail: `${detail}; ${weak}`,
            fix: 'raise the cost when you next change the password: stash vault passwd --kdf moderate',
          },
    );
  } catch (err) {
    checks.push({
      section,
      name: 'vault',
      status: 'fail',
      detail: errorMessage(err),
      fix: `restore ${vaultPaths(dir).meta} from a backup`,
    });
    return { checks, vault };
  }
  const p = vaultPaths(dir);
  const missing = [p.identity, p.contacts, p.containers].filter((f) => stat(f) === null);
  checks.push(
    missing.length === 0
      ? { section, name: 'vault files', status: 'ok', detail: 'vault.json, identity.json, contacts.stash, containers/' }
      : {
          section,
          name: 'vault files',
          status: 'fail',
          detail: `missing: ${missing.join(', ')}`,
          fix: 'restore the missing files from a backup of this vault',
        },
  );
  const open = openModes(dir);
  checks.push(
    open.length === 0
      ? { section, name: 'vault permissions', status: 'ok', detail: 'folders 0700, files 0600' }
      : { section, name: 'vault permissions', status: 'fail', detail: open.join('; '), fix: `chmod -R go-rwx ${dir}` },
  );
  try {
    checks.push({ section, name: 'identity', status: 'ok', detail: `fingerprint ${identityPublic(dir).fingerprint}` });
  } catch (err) {
    checks.push({
      section,
      name: 'identity',
      status: 'fail',
      detail: errorMessage(err),
      fix: `restore ${p.identity} from a backup`,
    });
  }
  try {
    const containers = listContainers(dir);
    vault.containers = containers.map((c) => ({ name: c.name, path: c.path, problem: c.problem }));
    const bad = containers.filter((c) => c.problem !== null);
    checks.push(
      bad.length === 0
        ? { section, name: 'containers', status: 'ok', detail: `${containers.length} container(s), headers sound` }
        : {
            section,
            name: 'containers',
            status: 'fail',
            detail: bad.map((c) => c.problem).join('; '),
            fix: 'restore the damaged container files from a backup, or delete them: stash container rm NAME --force',
          },
    );
  } catch (err) {
    checks.push({
      section,
      name: 'containers',
      status: 'fail',
      detail: errorMessage(err),
      fix: `check ${p.containers}`,
    });
  }
  return { checks, vault };
}
