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

/** The checks of the vault `env` points at, and what doctor --json reports of it. */
export function vaultChecks(env: NodeJS.ProcessEnv = process.env): {
  checks: DoctorCheck[];
  vault: Record<string, unknown>;
} {
  const dir = defaultVaultDir(env);
  const from = env.STASH_VAULT_DIR ? 'STASH_VAULT_DIR' : 'default location';
  const vault: Record<string, unknown> = { dir, source: from, exists: false };
  if (!vaultExists(dir)) {
    const none: DoctorCheck = {
      section,
      name: 'vault',
      status: 'warn',
      detail: `no vault at ${dir} (${from})`,
      fix: 'create one: stash vault init',
    };
    return { checks: [none], vault };
  }
  vault.exists = true;
  const meta = metaCheck(dir, from, vault);
  // Without a readable vault.json there is nothing more to check.
  if (meta.status === 'fail') return { checks: [meta], vault };
  const checks = [meta, filesCheck(dir), permissionsCheck(dir), identityCheck(dir), containersCheck(dir, vault)];
  return { checks, vault };
}

/** vault.json: its format and Argon2id cost (recorded in `vault.info`), a warning when the cost is weak. */
function metaCheck(dir: string, from: string, vault: Record<string, unknown>): DoctorCheck {
  try {
    const info = readVaultInfo(dir);
    vault.info = info;
    const detail = `${dir} (${from}); format ${info.formatVersion}, Argon2id ${info.kdf.opslimit} pass(es) / ${formatBytes(info.kdf.memlimit)}, created ${info.createdAt}`;
    const weak = weakKdf(info.kdf);
    return weak === null
      ? { section, name: 'vault', status: 'ok', detail }
      : {
          section,
          name: 'vault',
          status: 'warn',
          detail: `${detail}; ${weak}`,
          fix: 'raise the cost when you next change the password: stash vault passwd --kdf moderate',
        };
  } catch (err) {
    return {
      section,
      name: 'vault',
      status: 'fail',
      detail: errorMessage(err),
      fix: `restore ${vaultPaths(dir).meta} from a backup`,
    };
  }
}

/** The vault's other files and its containers folder are all there. */
function filesCheck(dir: string): DoctorCheck {
  const p = vaultPaths(dir);
  const missing = [p.identity, p.contacts, p.containers].filter((f) => stat(f) === null);
  return missing.length === 0
    ? { section, name: 'vault files', status: 'ok', detail: 'vault.json, identity.json, contacts.stash, containers/' }
    : {
        section,
        name: 'vault files',
        status: 'fail',
        detail: `missing: ${missing.join(', ')}`,
        fix: 'restore the missing files from a backup of this vault',
      };
}

/** No file or folder of the vault lets group or others in. */
function permissionsCheck(dir: string): DoctorCheck {
  const open = openModes(dir);
  return open.length === 0
    ? { section, name: 'vault permissions', status: 'ok', detail: 'folders 0700, files 0600' }
    : { section, name: 'vault permissions', status: 'fail', detail: open.join('; '), fix: `chmod -R go-rwx ${dir}` };
}

/** The public identity reads (no password needed): its fingerprint. */
function identityCheck(dir: string): DoctorCheck {
  try {
    return { section, name: 'identity', status: 'ok', detail: `fingerprint ${identityPublic(dir).fingerprint}` };
  } catch (err) {
    return {
      section,
      name: 'identity',
      status: 'fail',
      detail: errorMessage(err),
      fix: `restore ${vaultPaths(dir).identity} from a backup`,
    };
  }
}

/** Every container header is sound; the containers are recorded in `vault.containers`. */
function containersCheck(dir: string, vault: Record<string, unknown>): DoctorCheck {
  try {
    const containers = listContainers(dir);
    vault.containers = containers.map((c) => ({ name: c.name, path: c.path, problem: c.problem }));
    const bad = containers.filter((c) => c.problem !== null);
    return bad.length === 0
      ? { section, name: 'containers', status: 'ok', detail: `${containers.length} container(s), headers sound` }
      : {
          section,
          name: 'containers',
          status: 'fail',
          detail: bad.map((c) => c.problem).join('; '),
          fix: 'restore the damaged container files from a backup, or delete them: stash container rm NAME --force',
        };
  } catch (err) {
    return {
      section,
      name: 'containers',
      status: 'fail',
      detail: errorMessage(err),
      fix: `check ${vaultPaths(dir).containers}`,
    };
  }
}
