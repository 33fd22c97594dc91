/**
 * What a child running as another user (nobody, through setpriv) needs, in a
 * place that user can read. A checkout often sits under a folder only its owner
 * may enter (Debian 12 makes home folders 0700), and so may the Node binary
 * (a Node line fetched into ~/.cache): such a child can reach neither tsx in
 * node_modules nor the test tree. A readable copy holds the compiled package
 * (package.json, bin/, dist/ as `npm test` compiled it), the built addon, the
 * one runtime module the addon loader needs (node-gyp-build), or on request
 * every production dependency (Koa, sodium-native, ...), and, when the
 * running Node cannot be reached by others, a copy of the Node binary.
 */
import {
  accessSync,
  chmodSync,
  constants,
  copyFileSync,
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';

export interface ReadableCopy {
  /** The package root of the copy (bin/, dist/, build/Release/, node_modules/node-gyp-build). */
  root: string;
  /** A Node binary every user can run: process.execPath, or a copy of it. */
  node: string;
  remove(): void;
}

/** True when every folder above `path` lets others pass, and others may read and run the file. */
function othersCanRun(path: string): boolean {
  if ((statSync(path).mode & 0o005) !== 0o005) return false;
  for (let dir = dirname(path); ; dir = dirname(dir)) {
    if ((statSync(dir).mode & 0o001) === 0) return false;
    if (dirname(dir) === dir) return true;
  }
}

/** Every package folder the package needs at run time (package-lock.json entries not marked dev). */
function productionModules(checkout: string): string[] {
  const lock = JSON.parse(readFileSync(join(checkout, 'package-lock.json'), 'utf8')) as {
    packages: Record<string, { dev?: boolean }>;
  };
  return Object.entries(lock.packages)
    .filter(([path, entry]) => path.startsWith('node_modules/') && !entry.dev && existsSync(join(checkout, path)))
    .map(([path]) => path);
}

/** Opens a copied tree to everyone (a umask of 077 would have made the copies private too). */
function openUp(dir: string): void {
  chmodSync(dir, 0o755);
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) openUp(path);
    else chmodSync(path, statSync(path).mode & 0o111 ? 0o755 : 0o644);
  }
}

/**
 * Makes a readable copy of the compiled package under the OS temp folder (mode
 * 0755). `fixtures` (paths of .mjs files) are copied into <root>/fixtures/, from
 * where they import ../dist/....
 */
export function readableCopy(fixtures: string[] = [], opts: { dependencies?: boolean } = {}): ReadableCopy {
  const checkout = process.cwd();
  const root = mkdtempSync(join(tmpdir(), 'stash-readable-'));
  chmodSync(root, 0o755);
  copyFileSync(join(checkout, 'package.json'), join(root, 'package.json'));
  cpSync(join(checkout, 'bin'), join(root, 'bin'), { recursive: true });
  accessSync(join(checkout, 'dist'), constants.R_OK); // compiled by `npm test` before any suite runs
  cpSync(join(checkout, 'dist'), join(root, 'dist'), { recursive: true });
  mkdirSync(join(root, 'build', 'Release'), { recursive: true });
  copyFileSync(
    join(checkout, 'build', 'Release', 'stash_native.node'),
    join(root, 'build', 'Release', 'stash_native.node'),
  );
  const modules = opts.dependencies ? productionModules(checkout) : ['node_modules/node-gyp-build'];
  for (const m of modules) cpSync(join(checkout, m), join(root, m), { recursive: true });
  if (fixtures.length > 0) mkdirSync(join(root, 'fixtures'));
  for (const f of fixtures) copyFileSync(resolve(checkout, f), join(root, 'fixtures', f.split('/').pop()!));
  openUp(root);
  let node = process.execPath;
  if (!othersCanRun(node)) {
    node = join(root, 'node');
    copyFileSync(process.execPath, node);
    chmodSync(node, 0o755);
  }
  return { root, node, remove: () => rmSync(root, { recursive: true, force: true }) };
}

/** setpriv's arguments that run a command as nobody (uid and gid 65534, no groups). */
export const asNobody = ['setpriv', '--reuid=65534', '--regid=65534', '--clear-groups'] as const;
