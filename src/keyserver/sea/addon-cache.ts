/**
 * The native addons of the single executable. scripts/release/sea.js embeds
 * each one (sodium-native's prebuild for the target) as a SEA asset, but
 * dlopen needs a file: each is written once to a private folder per release
 * and loaded from there (docs/operations.md, "The single executable").
 *
 * Where: the first of $CACHE_DIRECTORY (systemd's CacheDirectory=; the
 * installed unit's /var/cache/stash-key-server), $XDG_CACHE_HOME/stash_key_server,
 * $HOME/.cache/stash_key_server, then $TMPDIR/stash_key_server-<uid> (an
 * empty environment) that can be created; inside it, one folder per
 * release, <version>-<platform>-<arch>.
 *
 * Trust: whoever can replace a file we dlopen runs code as the server. So
 * the folder of the release and the one holding it must be real folders
 * (not links) of our own uid that no other user may write to, the file a
 * regular file of ours that no one else may write, and its SHA-256 equal to
 * the embedded copy's, checked right before loading. A file that fails only
 * the digest (another build of the same version, a half-written file) is
 * replaced from the embedded copy; a folder or file owned by someone else is
 * an error, never used. A replacement is written to a temporary name and
 * renamed over the old one, so the store's process and a fetch process
 * starting at once never load half a file.
 */
import { createHash, randomBytes } from 'node:crypto';
import {
  lstatSync,
  mkdirSync,
  readFileSync,
  realpathSync,
  renameSync,
  rmSync,
  writeFileSync,
  type Stats,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { isAbsolute, join } from 'node:path';
import { getAsset } from 'node:sea';
import { StashError, errorMessage } from '../../errors.js';

/** The SEA asset key of an embedded addon (scripts/release/sea.js uses the same). */
export const addonAssetKey = (name: string): string => `addon/${name}.node`;

export class AddonCacheError extends StashError {
  constructor(message: string, cause?: unknown) {
    super('ADDON_CACHE', message, cause === undefined ? undefined : { cause });
  }
}

interface Candidate {
  /** The folder holding the per-release folders. */
  base: string;
  /** Where it comes from, for messages. */
  from: string;
  /** The base is systemd's own folder: it exists, we do not create it. */
  given: boolean;
}

/** Where the per-release folders may live, in order (see the file comment). */
export function cacheCandidates(env: NodeJS.ProcessEnv, uid: number): Candidate[] {
  const out: Candidate[] = [];
  // systemd may list several folders separated by colons; CacheDirectory= of the unit names one.
  const systemd = env.CACHE_DIRECTORY?.split(':')[0];
  if (systemd && isAbsolute(systemd)) out.push({ base: systemd, from: '$CACHE_DIRECTORY', given: true });
  if (env.XDG_CACHE_HOME && isAbsolute(env.XDG_CACHE_HOME))
    out.push({ base: join(env.XDG_CACHE_HOME, 'stash_key_server'), from: '$XDG_CACHE_HOME', given: false });
  if (env.HOME && isAbsolute(env.HOME))
    out.push({ base: join(env.HOME, '.cache', 'stash_key_server'), from: '$HOME', given: false });
  out.push({ base: join(tmpdir(), `stash_key_server-${uid}`), from: 'the temporary folder', given: false });
  return out;
}

const uid = (): number => (typeof process.getuid === 'function' ? process.getuid() : 0);

/** A folder we may keep code in: a real folder, ours, writable by no one else. */
function checkFolder(path: string, st: Stats): void {
  if (st.isSymbolicLink() || !st.isDirectory())
    throw new AddonCacheError(
      `${path} is not a folder (a link or a file is not trusted with the server's native code)`,
    );
  if (st.uid !== uid())
    throw new AddonCacheError(
      `${path} belongs to uid ${st.uid}, not to this process (uid ${uid()}): remove it or run as its owner`,
    );
  if ((st.mode & 0o022) !== 0)
    throw new AddonCacheError(
      `${path} may be written by other users (mode ${(st.mode & 0o777).toString(8)}): chmod go-w it, or remove it`,
    );
}

/** Creates (0700) or checks `dir`. */
function privateFolder(dir: string): void {
  try {
    mkdirSync(dir, { mode: 0o700 });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
  }
  checkFolder(dir, lstatSync(dir));
}

/** The checked folder of this release, created where the first candidate allows. */
export function releaseFolder(version: string, env: NodeJS.ProcessEnv = process.env): string {
  const leafName = `${version}-${process.platform}-${process.arch}`;
  const failures: string[] = [];
  for (const c of cacheCandidates(env, uid())) {
    let base: string;
    try {
      if (!c.given) mkdirSync(c.base, { recursive: true, mode: 0o700 });
      // The base may be reached through a link of root's (systemd's /var/cache/NAME -> private/NAME); the folder itself is checked.
      base = realpathSync(c.base);
    } catch (err) {
      failures.push(`${c.base} (${c.from}): ${(err as NodeJS.ErrnoException).code ?? errorMessage(err)}`);
      continue;
    }
    // A folder that exists but is not ours is refused, not skipped: the next candidate would hide the problem.
    checkFolder(base, lstatSync(base));
    const leaf = join(base, leafName);
    privateFolder(leaf);
    return leaf;
  }
  throw new AddonCacheError(`no folder could be created for the native addons: ${failures.join('; ')}`);
}

const sha256 = (bytes: Uint8Array): string => createHash('sha256').update(bytes).digest('hex');

/** True when `path` is a regular file of ours, written by no one else, holding exactly `digest`. */
function trusted(path: string, digest: string): boolean {
  let st: Stats;
  try {
    st = lstatSync(path);
  } catch {
    return false;
  }
  if (!st.isFile() || st.uid !== uid() || (st.mode & 0o022) !== 0) {
    // Inside our own 0700 folder only root could have put it there; replace it rather than trust it.
    rmSync(path, { force: true });
    return false;
  }
  return sha256(readFileSync(path)) === digest;
}

/**
 * Loads the embedded addon `name` of release `version`: writes it out when
 * the cached file is missing or differs, then dlopens the checked file and
 * returns its exports.
 */
export function loadEmbeddedAddon(name: string, version: string): unknown {
  let bytes: Uint8Array;
  try {
    bytes = new Uint8Array(getAsset(addonAssetKey(name)));
  } catch (err) {
    throw new AddonCacheError(
      `this executable carries no ${name} addon (${errorMessage(err)}): it was not built by scripts/release/sea.js`,
      err,
    );
  }
  const digest = sha256(bytes);
  let path = '';
  try {
    const dir = releaseFolder(version);
    path = join(dir, `${name}.node`);
    if (!trusted(path, digest)) {
      const temp = join(dir, `.${name}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`);
      writeFileSync(temp, bytes, { mode: 0o500, flag: 'wx' });
      renameSync(temp, path);
      // Checked as it is on disk now, the way every later start checks it.
      if (!trusted(path, digest)) throw new AddonCacheError(`${path} did not read back as written`);
    }
  } catch (err) {
    if (err instanceof AddonCacheError) throw err;
    throw new AddonCacheError(
      `the native addon ${name} could not be written out${path ? ` to ${path}` : ''}: ${errorMessage(err)}`,
      err,
    );
  }
  const mod = { exports: {} as unknown };
  try {
    process.dlopen(mod, path);
  } catch (err) {
    throw new AddonCacheError(`the native addon ${path} did not load: ${errorMessage(err)}`, err);
  }
  return mod.exports;
}
